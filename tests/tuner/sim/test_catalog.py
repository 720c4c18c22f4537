from __future__ import annotations

from pathlib import Path

import pytest

from slotune.collector.errors import ConfigError
from slotune.tuner.sim.catalog import (
    CATALOG_ENV,
    _loader,
    get_gpu,
    get_model,
    list_gpus,
    list_models,
    load_catalog_file,
)


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees only the bundled catalog, and its additions vanish afterwards."""
    monkeypatch.setattr(_loader, "_registry", None)
    monkeypatch.delenv(CATALOG_ENV, raising=False)


REQUIRED_GPUS = {
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
    "l40s",
    "l4",
    "a10g",
    "rtx-4090",
    "rtx-pro-6000",
    "mi300x",
}
REQUIRED_MODELS = {
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "mistral-7b",
    "qwen2.5-7b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "mixtral-8x7b",
}


def test_required_ids_present_with_sources():
    assert {g.id for g in list_gpus()} >= REQUIRED_GPUS
    assert {m.id for m in list_models()} >= REQUIRED_MODELS
    assert all(g.source for g in list_gpus())
    assert all(m.source for m in list_models())


def test_gpu_numbers_are_si_units():
    h100 = get_gpu("h100-sxm")
    assert h100.bf16_flops == pytest.approx(989.4e12)
    assert h100.fp8_flops == pytest.approx(2 * h100.bf16_flops, rel=1e-3)
    assert h100.mem_bw_bytes_s == pytest.approx(3.35e12)
    assert h100.mem_bytes == int(79.19 * 1024**3)
    assert get_gpu("H100-SXM") is h100


def test_parameter_counts_match_the_architecture():
    """The listed parameter count agrees with the one implied by the dimensions."""
    for m in list_models():
        h = m.hidden_size
        attention = 2 * h * m.num_heads * m.head_dim + 2 * h * m.num_kv_heads * m.head_dim
        width = m.moe_intermediate_size * m.num_experts if m.is_moe else m.intermediate_size
        implied = m.num_layers * (attention + 3 * h * width) + 2 * m.vocab_size * h
        assert implied == pytest.approx(m.num_params, rel=0.01), m.id


def test_moe_models():
    qwen = get_model("qwen3-30b-a3b")
    assert (qwen.num_experts, qwen.num_active_experts, qwen.moe_intermediate_size) == (128, 8, 768)
    mixtral = get_model("mixtral-8x7b")
    assert (mixtral.num_experts, mixtral.num_active_experts) == (8, 2)
    assert not get_model("llama-3.1-8b").is_moe


def test_hugging_face_names_resolve():
    assert get_model("meta-llama/Llama-3.1-8B-Instruct").id == "llama-3.1-8b"
    assert get_model("meta-llama/meta-llama-3.1-8b").id == "llama-3.1-8b"
    assert get_model("Qwen/Qwen3-30B-A3B").id == "qwen3-30b-a3b"


def test_unknown_ids_list_valid_ones_and_how_to_add():
    with pytest.raises(ConfigError, match=r"unknown GPU 'h999'.*a100-40gb.*SLOTUNE_CATALOG"):
        get_gpu("h999")
    with pytest.raises(ConfigError, match=r"unknown model 'gpt-5'.*llama-3.1-8b.*YAML"):
        get_model("gpt-5")


USER_YAML = """
gpus:
  - id: test-gpu-1
    name: Test GPU
    bf16_tflops: 100
    fp8_tflops: 200
    mem_gib: 10
    mem_bw_gb_s: 500
    interconnect_bw_gb_s: 64
    source: test
models:
  - id: test-model-1
    hf_name: test-org/Test-Model-1B
    num_layers: 4
    hidden_size: 256
    num_heads: 4
    num_kv_heads: 2
    intermediate_size: 512
    vocab_size: 1000
    num_params: 3000000
    max_position_embeddings: 2048
"""


def test_user_yaml_adds_entries(tmp_path: Path):
    path = tmp_path / "extra.yaml"
    path.write_text(USER_YAML)
    assert load_catalog_file(path) == (["test-gpu-1"], ["test-model-1"])
    gpu = get_gpu("test-gpu-1")
    assert gpu.bf16_flops == pytest.approx(100e12)
    assert gpu.mem_bytes == 10 * 1024**3
    model = get_model("test-org/test-model-1b")
    assert model.id == "test-model-1"
    assert model.head_dim == 64
    assert model.dtype_bytes == 2 and model.num_experts == 0


def test_env_variable_loads_every_listed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    paths = []
    for name in ("env-a", "env-b"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            USER_YAML.replace("test-gpu-1", f"gpu-{name}")
            .replace("test-model-1", f"model-{name}")
            .replace("Test-Model-1B", name)
        )
        paths.append(str(path))
    monkeypatch.setenv(CATALOG_ENV, ":".join(paths))
    assert get_gpu("gpu-env-a").name == "Test GPU"
    assert get_model("model-env-b").num_layers == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpus: [1, 2", "not valid YAML"),
        ("- a\n- b", "must be a mapping"),
        ("gpus: {id: x}", "must be a list"),
        ("gpus:\n  - id: x\n    name: X", r"missing field\(s\) \['bf16_tflops'"),
        (
            USER_YAML.replace("    source: test\n", "    sorce: test\n"),
            r"unknown field\(s\) \['sorce'\]",
        ),
        (
            USER_YAML.replace("bf16_tflops: 100", "bf16_tflops: fast"),
            "`bf16_tflops` must be a number",
        ),
        (
            USER_YAML.replace("num_layers: 4", "num_layers: 4.5"),
            "`num_layers` must be a whole number",
        ),
        (
            USER_YAML.replace("num_kv_heads: 2", "num_kv_heads: 3"),
            "must be a multiple of num_kv_heads",
        ),
        (USER_YAML.replace("id: test-gpu-1", "id: Test GPU"), "must be lowercase-dashed"),
        (USER_YAML + "    num_experts: 8\n", "an MoE model"),
        ("widgets: []", "must be a mapping with a `gpus:`"),
    ],
)
def test_bad_yaml_is_a_clear_error(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_catalog_file(path)


def test_missing_file_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read the catalog file"):
        load_catalog_file(tmp_path / "nope.yaml")
