"""The tiny model's architecture: a Llama with random weights, written as safetensors.

The shape is the smallest that still exercises what a serving engine does with a real model:
several layers, grouped-query attention (4 query heads share 2 key/value heads) and a head
size of 64, which vLLM's CPU attention supports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slotune.tuner.tiny_model._safetensors import write_safetensors


@dataclass(frozen=True, slots=True)
class LlamaShape:
    """Sizes of the tiny Llama."""

    vocab_size: int
    hidden_size: int = 256
    intermediate_size: int = 688
    num_layers: int = 7
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 2048

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


def hf_config(shape: LlamaShape, *, bos_token_id: int, eos_token_id: int) -> dict[str, object]:
    """``config.json`` as transformers' ``LlamaConfig`` writes it."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": shape.vocab_size,
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.num_layers,
        "num_attention_heads": shape.num_heads,
        "num_key_value_heads": shape.num_kv_heads,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": shape.max_position_embeddings,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "torch_dtype": "bfloat16",
    }


def random_weights(
    shape: LlamaShape, seed: int, output_ids: Sequence[int]
) -> dict[str, np.ndarray]:
    """Every tensor of ``LlamaForCausalLM`` under its checkpoint name, drawn from N(0, 0.02²).

    Only the ``lm_head`` rows of ``output_ids`` are drawn, and wider (N(0, 0.3²)); the others
    are zero. After the final RMS norm the hidden state has a norm of sqrt(hidden_size), so the
    logits of the output ids spread with a standard deviation near 5 while every other logit
    is 0: sampling at temperature 1 picks one of them with a probability below 1e-4 per token.
    Output streams then carry text in every chunk, as a trained model's do, instead of lone
    bytes, spaces and end-of-sequence tokens.
    """
    rng = np.random.default_rng(seed)
    h, kv = shape.hidden_size, shape.num_kv_heads * shape.head_dim

    def normal(*dims: int) -> np.ndarray:
        return (rng.standard_normal(dims, dtype=np.float32) * 0.02).astype(np.float32)

    ones = np.ones(h, dtype=np.float32)
    tensors = {"model.embed_tokens.weight": normal(shape.vocab_size, h)}
    for i in range(shape.num_layers):
        p = f"model.layers.{i}."
        tensors |= {
            p + "input_layernorm.weight": ones,
            p + "self_attn.q_proj.weight": normal(h, h),
            p + "self_attn.k_proj.weight": normal(kv, h),
            p + "self_attn.v_proj.weight": normal(kv, h),
            p + "self_attn.o_proj.weight": normal(h, h),
            p + "post_attention_layernorm.weight": ones,
            p + "mlp.gate_proj.weight": normal(shape.intermediate_size, h),
            p + "mlp.up_proj.weight": normal(shape.intermediate_size, h),
            p + "mlp.down_proj.weight": normal(h, shape.intermediate_size),
        }
    head = np.zeros((shape.vocab_size, h), dtype=np.float32)
    rows = np.asarray(output_ids, dtype=np.int64)
    head[rows] = rng.standard_normal((len(rows), h), dtype=np.float32) * 0.3
    tensors |= {"model.norm.weight": ones, "lm_head.weight": head}
    return tensors


def write_weights(out_dir: Path, shape: LlamaShape, seed: int, output_ids: Sequence[int]) -> int:
    """Write ``model.safetensors``; return the number of parameters."""
    tensors = random_weights(shape, seed, output_ids)
    write_safetensors(out_dir / "model.safetensors", tensors)
    return sum(int(t.size) for t in tensors.values())
