"""Operator-level time formulas shared by the cost model and the calibration fit.

Each formula works on floats and on numpy arrays alike, so the fit evaluates exactly the code
the simulator runs. Times are seconds for one call of the operator on one tensor-parallel rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slotune.tuner.sim.cost_coeffs import AllReduceCoeffs, ElementwiseCoeffs, GemmCoeffs

# Formulas take scalars (the simulator) or numpy arrays (the calibration fit).
Num = float | np.ndarray

GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")


@dataclass(frozen=True, slots=True)
class LayerDims:
    """One decoder layer's widths as seen by one tensor-parallel rank's kernels."""

    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    tensor_parallel_size: int = 1
    dtype_bytes: int = 2

    @property
    def heads_per_rank(self) -> int:
        return max(1, self.num_heads // self.tensor_parallel_size)

    @property
    def kv_heads_per_rank(self) -> int:
        # vLLM replicates KV heads when there are fewer of them than ranks.
        return max(1, self.num_kv_heads // self.tensor_parallel_size)

    def gemm_shapes(self) -> dict[str, tuple[int, int]]:
        """(K, N) of each dense linear layer: column-parallel QKV and gate/up split N,
        row-parallel output and down projections split K."""
        tp = self.tensor_parallel_size
        qkv = (self.heads_per_rank + 2 * self.kv_heads_per_rank) * self.head_dim
        return {
            "attn_pre_proj": (self.hidden_size, qkv),
            "attn_post_proj": (self.heads_per_rank * self.head_dim, self.hidden_size),
            "mlp_up_proj": (self.hidden_size, 2 * self.intermediate_size // tp),
            "mlp_down_proj": (self.intermediate_size // tp, self.hidden_size),
        }

    def elementwise_bytes_per_token(self) -> dict[str, float]:
        """Bytes each memory-bound operator moves per token (reads + writes)."""
        b = self.dtype_bytes
        h = self.hidden_size
        rope_width = (self.heads_per_rank + self.kv_heads_per_rank) * self.head_dim
        return {
            "emb": 2 * h * b,
            "input_layernorm": 2 * h * b,
            "attn_rope": 2 * rope_width * b,
            "post_attention_layernorm": 2 * h * b,
            "mlp_act": 3 * (self.intermediate_size // self.tensor_parallel_size) * b,
            "add": 3 * h * b,
        }


def roofline_time_s(
    flops: Num, bytes_moved: Num, peak_flops: float, bandwidth: float, c: GemmCoeffs
) -> Num:
    """A smooth roofline: the p-norm of compute time and memory time, plus a fixed latency.

    p = 1 adds the two (no overlap), p -> infinity takes the larger (perfect overlap); the fit
    picks p, which also absorbs the efficiency dip of mid-sized GEMMs near the ridge point.
    """
    compute = flops / (c.compute_eff * peak_flops)
    memory = bytes_moved / (c.memory_eff * bandwidth)
    p = c.smoothing_p
    return c.latency_s + (compute**p + memory**p) ** (1.0 / p)


def gemm_flops_bytes(
    m: Num, k: Num, n: Num, dtype_bytes: int = 2, weight_bytes: int | None = None
) -> tuple[Num, Num]:
    """FLOPs and bytes of an (m x k) @ (k x n) product: weights plus input and output.

    ``weight_bytes`` is the weights' width when it differs from the activations' (fp8
    weights with 16-bit activations).
    """
    w = dtype_bytes if weight_bytes is None else weight_bytes
    return 2.0 * m * k * n, w * k * n + dtype_bytes * m * (k + n)


def gemm_time_s(
    m: Num, k: Num, n: Num, peak_flops: float, bandwidth: float, c: GemmCoeffs, dtype_bytes: int = 2
) -> Num:
    """Time of an (m x k) @ (k x n) matrix multiply."""
    flops, moved = gemm_flops_bytes(m, k, n, dtype_bytes)
    return roofline_time_s(flops, moved, peak_flops, bandwidth, c)


def elementwise_time_s(
    num_tokens: Num, bytes_per_token: Num, bandwidth: float, c: ElementwiseCoeffs
) -> Num:
    """Time of a memory-bound kernel moving ``bytes_per_token`` for each of ``num_tokens``."""
    streaming = num_tokens * bytes_per_token / (c.memory_eff * bandwidth)
    one_row = bytes_per_token / (c.row_eff * bandwidth)
    return c.latency_s + np.maximum(streaming, one_row)


def all_reduce_time_s(
    bytes_per_rank: Num, num_workers: int, interconnect_bw: float, c: AllReduceCoeffs
) -> Num:
    """Ring all-reduce of a ``bytes_per_rank`` buffer over ``num_workers`` GPUs.

    Args:
        bytes_per_rank: size of the buffer each rank contributes.
        num_workers: GPUs in the group (1 means no communication).
        interconnect_bw: the GPU's interconnect bandwidth, both directions together.
        c: fitted latency and bus-bandwidth efficiency.
    """
    if num_workers <= 1:
        return bytes_per_rank * 0.0
    latency, eff = c.for_workers(num_workers)
    bus_bw = eff * interconnect_bw / 2.0
    return latency + bytes_per_rank * (2.0 * (num_workers - 1) / num_workers) / bus_bw


def expected_experts_touched(num_tokens: Num, num_experts: int, num_active: int) -> Num:
    """Expected number of distinct experts a batch routes to, with uniform routing.

    Each token picks ``num_active`` of ``num_experts``; an expert is missed by one token with
    probability ``1 - k/E``, so ``E * (1 - (1 - k/E) ** T)`` experts are touched.
    """
    return num_experts * (1.0 - (1.0 - num_active / num_experts) ** num_tokens)
