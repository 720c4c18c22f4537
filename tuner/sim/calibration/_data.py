"""Reading the operator profiling data (Vidur's ``data/profiling`` layout).

``compute/<gpu>/<org>/<model>/mlp.csv`` has one row per (model dims, ``num_tokens``,
``num_tensor_parallel_workers``) with ``time_stats.<op>.median`` in milliseconds per layer;
``network/<gpu>_dgx/all_reduce.csv`` has collective times in milliseconds by message size in
bytes and worker count.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.tuner.sim.cost_coeffs import ELEMENTWISE_OPS
from slotune.tuner.sim.cost_ops import GEMM_OPS, LayerDims

_MS = 1e-3


@dataclass(frozen=True)
class OpSamples:
    """Measured times of one operator of one model on one GPU family.

    Arrays are aligned: one entry per (token count, tensor-parallel size) row.
    """

    family: str
    model: str
    op: str
    num_tokens: np.ndarray
    tensor_parallel_size: np.ndarray
    dims: tuple[LayerDims, ...]
    measured_s: np.ndarray


@dataclass(frozen=True)
class AllReduceSamples:
    family: str
    num_workers: int
    size_bytes: np.ndarray
    measured_s: np.ndarray


def _dims(row: dict[str, str]) -> LayerDims:
    hidden = int(row["n_embd"])
    heads = int(row["n_head"])
    return LayerDims(
        hidden,
        heads,
        int(row["n_kv_head"]),
        hidden // heads,
        int(row["n_expanded_embd"]),
        int(row["num_tensor_parallel_workers"]),
    )


def _read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def load_compute(profiling_dir: Path) -> list[OpSamples]:
    """Every operator series under ``profiling_dir/compute``.

    Raises:
        ConfigError: no ``mlp.csv`` found (wrong directory).
    """
    files = sorted((profiling_dir / "compute").glob("*/*/*/mlp.csv"))
    if not files:
        raise ConfigError(
            f"no compute/<gpu>/<org>/<model>/mlp.csv under {profiling_dir}; pass the "
            "profiling directory (the one holding compute/ and network/) with --profiling"
        )
    out = []
    for path in files:
        family, model = path.parts[-4], path.parts[-2]
        rows = _read_rows(path)
        tokens = np.array([int(r["num_tokens"]) for r in rows], dtype=float)
        tp = np.array([int(r["num_tensor_parallel_workers"]) for r in rows])
        dims = tuple(_dims(r) for r in rows)
        for op in GEMM_OPS + ELEMENTWISE_OPS:
            measured = np.array([float(r[f"time_stats.{op}.median"]) * _MS for r in rows])
            keep = measured > 0
            out.append(
                OpSamples(
                    family,
                    model,
                    op,
                    tokens[keep],
                    tp[keep],
                    tuple(d for d, k in zip(dims, keep, strict=True) if k),
                    measured[keep],
                )
            )
    return out


def load_all_reduce(profiling_dir: Path) -> list[AllReduceSamples]:
    """All-reduce series within one node (workers == devices per node), per worker count."""
    out = []
    for path in sorted((profiling_dir / "network").glob("*/all_reduce.csv")):
        family = path.parent.name.removesuffix("_dgx")
        rows = [r for r in _read_rows(path) if r["num_workers"] == r["devices_per_node"]]
        for n in sorted({int(r["num_workers"]) for r in rows}):
            sel = [r for r in rows if int(r["num_workers"]) == n]
            out.append(
                AllReduceSamples(
                    family,
                    n,
                    np.array([float(r["size"]) for r in sel]),
                    np.array([float(r["time_stats.all_reduce.median"]) * _MS for r in sel]),
                )
            )
    return out
