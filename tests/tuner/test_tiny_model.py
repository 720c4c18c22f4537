"""The tiny model's files: a loadable safetensors checkpoint, a config that matches it, and a
tokenizer whose chat template produces the role tokens."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tokenizers
from _tools import SLOTUNE

from slotune.collector.errors import ConfigError
from slotune.tuner.tiny_model import build_tiny_model
from slotune.tuner.tiny_model._safetensors import write_safetensors


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    header.pop("__metadata__")
    data = raw[8 + size :]
    dtypes = {"F32": "<f4", "F16": "<f2"}
    return {
        name: np.frombuffer(
            data[entry["data_offsets"][0] : entry["data_offsets"][1]], dtype=dtypes[entry["dtype"]]
        ).reshape(entry["shape"])
        for name, entry in header.items()
    }


def test_safetensors_round_trip(tmp_path: Path) -> None:
    tensors: dict[str, np.ndarray] = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.array([1.5, -2.0], dtype=np.float16),
    }
    write_safetensors(tmp_path / "t.safetensors", tensors)
    raw = (tmp_path / "t.safetensors").read_bytes()
    assert (8 + struct.unpack("<Q", raw[:8])[0]) % 8 == 0  # data starts aligned
    back = read_safetensors(tmp_path / "t.safetensors")
    assert set(back) == {"a", "b"}
    for name, tensor in tensors.items():
        assert back[name].dtype == tensor.dtype
        np.testing.assert_array_equal(back[name], tensor)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny")).path


def test_config_matches_the_weights(model_dir: Path) -> None:
    config = json.loads((model_dir / "config.json").read_text())
    weights = read_safetensors(model_dir / "model.safetensors")
    h, vocab = config["hidden_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * config["head_dim"]
    assert weights["model.embed_tokens.weight"].shape == (vocab, h)
    assert weights["lm_head.weight"].shape == (vocab, h)
    last = config["num_hidden_layers"] - 1
    assert weights[f"model.layers.{last}.self_attn.k_proj.weight"].shape == (kv, h)
    assert f"model.layers.{last + 1}.input_layernorm.weight" not in weights
    assert 5e6 < sum(w.size for w in weights.values()) < 6e6


def test_tokenizer_encodes_the_chat_template_roles(model_dir: Path) -> None:
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    config = json.loads((model_dir / "config.json").read_text())
    assert tok.get_vocab_size() == config["vocab_size"]
    assert tok.token_to_id("</s>") == config["eos_token_id"]
    text = "<|user|>\nHello, wörld! 🙂<|end|>\n<|assistant|>\n"
    ids = tok.encode(text).ids
    assert tok.token_to_id("<|assistant|>") in ids
    assert tok.decode(ids, skip_special_tokens=False) == text  # byte-level: nothing unknown
    template = json.loads((model_dir / "tokenizer_config.json").read_text())["chat_template"]
    assert "add_generation_prompt" in template


def test_the_head_produces_only_tokens_with_a_word_character(model_dir: Path) -> None:
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    head = read_safetensors(model_dir / "model.safetensors")["lm_head.weight"]
    live = {i for i in range(head.shape[0]) if head[i].any()}
    assert tok.token_to_id("</s>") not in live
    assert tok.token_to_id("<|assistant|>") not in live
    assert tok.token_to_id(" ") not in live
    assert tok.token_to_id("Ġengine") in live  # byte-level spelling of " engine"
    assert all(any(c.isalnum() or c == "_" for c in tok.decode([i])) for i in live)


def test_the_same_seed_writes_the_same_weights(model_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again").path
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (again / name).read_bytes() == (model_dir / name).read_bytes(), name


def test_a_file_in_the_way_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        build_tiny_model(tmp_path / "taken")


def test_cli_builds_the_model(tmp_path: Path) -> None:
    out = subprocess.run(
        [SLOTUNE, "tiny-model", "build", str(tmp_path / "m"), "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    assert report["path"] == str(tmp_path / "m")
    assert (tmp_path / "m" / "model.safetensors").is_file()


def test_cli_prints_a_directory_with_rich_markup_as_it_is(tmp_path: Path) -> None:
    out_dir = tmp_path / "[" / "x]"
    out = subprocess.run(
        [SLOTUNE, "tiny-model", "build", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{out_dir}: Llama,") and not out.stderr
