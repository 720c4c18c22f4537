"""A tiny random-weight Llama with a locally trained tokenizer, for running real engines.

Real vLLM needs a model directory in Hugging Face layout. This builds one from code and the
text shipped here, with no download: about 5.5 M parameters, enough for vLLM's CPU build to
serve completions and chat at a few hundred tokens per second on two cores. Its answers are
random words of its vocabulary; it exists so that latency, batching and metrics are real.

    build_tiny_model(out_dir) -> TinyModel
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from slotune.collector.textfile import output_dir, write_text
from slotune.tuner.tiny_model._llama import LlamaShape, hf_config, write_weights
from slotune.tuner.tiny_model._tokenizer import (
    BOS,
    EOS,
    SPECIAL_TOKENS,
    tokenizer_config,
    train_tokenizer,
)

__all__ = ["TinyModel", "build_tiny_model"]

_VOCAB_TARGET = 2048


@dataclass(frozen=True, slots=True)
class TinyModel:
    """What ``build_tiny_model`` wrote."""

    path: Path
    num_params: int
    vocab_size: int
    max_model_len: int

    def to_dict(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "num_params": self.num_params,
            "vocab_size": self.vocab_size,
            "max_model_len": self.max_model_len,
        }


def _write_json(path: Path, data: dict[str, object]) -> None:
    write_text(path, json.dumps(data, indent=2) + "\n", "model file")


def build_tiny_model(out_dir: Path, *, seed: int = 0, max_model_len: int = 2048) -> TinyModel:
    """Write the tiny model (config, weights, tokenizer, chat template) into ``out_dir``.

    Args:
        out_dir: directory to create or fill; files already there with the same names are
            replaced, others are left alone.
        seed: seed of the random weights (the same seed gives the same bytes).
        max_model_len: context length written into the config and tokenizer config.

    Returns:
        The directory and the model's sizes.
    """
    out_dir = output_dir(out_dir, "model directory")
    vocabulary = train_tokenizer(out_dir, _VOCAB_TARGET)
    shape = LlamaShape(vocab_size=vocabulary.size, max_position_embeddings=max_model_len)
    bos_id, eos_id = SPECIAL_TOKENS.index(BOS), SPECIAL_TOKENS.index(EOS)
    _write_json(out_dir / "config.json", hf_config(shape, bos_token_id=bos_id, eos_token_id=eos_id))
    _write_json(out_dir / "tokenizer_config.json", tokenizer_config(max_model_len))
    _write_json(
        out_dir / "special_tokens_map.json",
        {"bos_token": BOS, "eos_token": EOS, "unk_token": "<unk>"},
    )
    _write_json(
        out_dir / "generation_config.json",
        {"bos_token_id": bos_id, "eos_token_id": eos_id},
    )
    num_params = write_weights(out_dir, shape, seed, vocabulary.word_ids)
    return TinyModel(out_dir, num_params, shape.vocab_size, max_model_len)
