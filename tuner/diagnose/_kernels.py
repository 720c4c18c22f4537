"""Kernel categories and the kernels that take the most GPU time.

Categories are read from kernel names, which carry the library and the operation (cuBLAS /
CUTLASS / hipBLASLt GEMMs, FlashAttention / FlashInfer / paged attention, PyTorch's
elementwise and reduce templates, NCCL / RCCL collectives). The first pattern that matches
wins, in the order below, so ``flash_fwd_..._gemm`` is attention, not GEMM.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from slotune.tuner.diagnose._trace import DeviceTrace, OpKind


class Category(StrEnum):
    GEMM = "GEMM"
    ATTENTION = "attention"
    ELEMENTWISE = "elementwise"
    REDUCE = "reduce"
    COMMUNICATION = "communication"
    OTHER = "other"


_PATTERNS = (
    (
        Category.COMMUNICATION,
        re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter", re.I),
    ),
    (
        Category.ATTENTION,
        re.compile(r"flash|attention|attn|fmha|paged|sdpa|mha_|xformers|flashinfer|mla_", re.I),
    ),
    (
        Category.GEMM,
        re.compile(
            r"gemm|gemv|cutlass|cublas|matmul|xmma|wgmma|nvjet|Cijk_|splitk|_mm_|"
            r"implicit_convolve|conv|cudnn",
            re.I,
        ),
    ),
    (Category.REDUCE, re.compile(r"reduce|softmax|norm|argmax|topk|scan|sum_|mean_", re.I)),
    (
        Category.ELEMENTWISE,
        re.compile(
            r"elementwise|vectorized|unrolled|activation|silu|gelu|relu|rotary|copy|fill|"
            r"index|cat_|add|mul|cast|pointwise|triton_poi",
            re.I,
        ),
    ),
)


def categorize(name: str) -> Category:
    """The category of a kernel, from its name."""
    for category, pattern in _PATTERNS:
        if pattern.search(name):
            return category
    return Category.OTHER


@dataclass(frozen=True, slots=True)
class KernelRow:
    """One kernel name's total over the trace."""

    name: str
    category: Category
    count: int
    total_ms: float
    mean_us: float
    busy_share: float
    gb_per_s: float | None
    tflop_per_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category.value,
            "count": self.count,
            "total_ms": self.total_ms,
            "mean_us": self.mean_us,
            "busy_share": self.busy_share,
            "gb_per_s": self.gb_per_s,
            "tflop_per_s": self.tflop_per_s,
        }


def kernel_rows(devices: Sequence[DeviceTrace], busy_ms: float) -> list[KernelRow]:
    """Every kernel name's total over all devices, longest first."""
    totals: dict[str, list[float]] = {}
    for dev in devices:
        mask = np.isin(dev.op_kind, (OpKind.COMPUTE, OpKind.COMM))
        ids = dev.op_name[mask]
        dur = dev.op_end[mask] - dev.op_start[mask]
        size = max(len(dev.names), 1)
        time_us = np.bincount(ids, weights=dur, minlength=size)
        count = np.bincount(ids, minlength=size)
        num_bytes = np.bincount(ids, weights=dev.op_bytes[mask], minlength=size)
        flops = np.bincount(ids, weights=dev.op_flops[mask], minlength=size)
        for i in np.flatnonzero(count):
            row = totals.setdefault(dev.names[i], [0.0, 0.0, 0.0, 0.0])
            row[0] += float(count[i])
            row[1] += float(time_us[i])
            row[2] += float(num_bytes[i])
            row[3] += float(flops[i])
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][1])
    return [
        KernelRow(
            name=name,
            category=categorize(name),
            count=int(count),
            total_ms=time_us / 1000.0,
            mean_us=time_us / count,
            busy_share=time_us / 1000.0 / busy_ms if busy_ms > 0 else 0.0,
            gb_per_s=num_bytes / time_us / 1e3 if num_bytes > 0 and time_us > 0 else None,
            tflop_per_s=flops / time_us / 1e6 if flops > 0 and time_us > 0 else None,
        )
        for name, (count, time_us, num_bytes, flops) in ranked
    ]


def category_totals(rows: Sequence[KernelRow]) -> dict[str, float]:
    """Milliseconds per category over the given rows (all categories, zero included)."""
    out = {c.value: 0.0 for c in Category}
    for row in rows:
        out[row.category.value] += row.total_ms
    return out
