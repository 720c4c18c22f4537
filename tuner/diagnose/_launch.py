"""Launch overhead: what the CPU spends launching work and how long the GPU waits for it.

Launches are joined to GPU operations on ``args.correlation`` (as HTA does). A graph launch
(``cudaGraphLaunch`` / ``hipGraphLaunch``) owns every kernel that carries its correlation id;
its launch delay is measured to the first of them. Launch delay = GPU start - (CPU launch
start + launch duration): how long the launched work queued behind earlier work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slotune.tuner.diagnose._intervals import F64
from slotune.tuner.diagnose._trace import CallKind, DeviceTrace, OpKind

SHORT_KERNEL_US = 10.0
_KERNEL_KINDS = (OpKind.COMPUTE, OpKind.COMM)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of a sample of durations, in µs."""

    count: int
    mean_us: float | None
    p50_us: float | None
    p90_us: float | None
    p99_us: float | None
    max_us: float | None

    @classmethod
    def of(cls, values: F64) -> Distribution:
        if values.size == 0:
            return cls(0, None, None, None, None, None)
        p50, p90, p99 = np.percentile(values, (50, 90, 99))
        return cls(
            int(values.size),
            float(values.mean()),
            float(p50),
            float(p90),
            float(p99),
            float(values.max()),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "mean_us": self.mean_us,
            "p50_us": self.p50_us,
            "p90_us": self.p90_us,
            "p99_us": self.p99_us,
            "max_us": self.max_us,
        }


@dataclass(frozen=True, slots=True)
class LaunchStats:
    """Launch figures over the whole trace (all ranks and devices).

    Attributes:
        launch_cpu_ms: CPU time inside kernel and graph launch calls.
        sync_cpu_ms: CPU time inside synchronise calls (device/stream/event sync, cudaMemcpy).
        launch_delay: GPU start - (launch start + launch duration), per launch with GPU work.
        num_short_kernels: kernels shorter than 10 µs.
        short_kernel_busy_share: their summed duration over the GPU busy time.
        num_graph_kernels: kernels run through graph launches.
        longest_launch_ms: the longest single launch call (the first launch of a kernel
            can take seconds while its module loads: a sign the trace includes warm-up).
    """

    num_kernels: int
    num_kernel_launches: int
    num_graph_launches: int
    num_graph_kernels: int
    launch_cpu_ms: float
    sync_cpu_ms: float
    launch_delay: Distribution
    num_short_kernels: int
    short_kernel_busy_share: float
    longest_launch_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_kernels": self.num_kernels,
            "num_kernel_launches": self.num_kernel_launches,
            "num_graph_launches": self.num_graph_launches,
            "num_graph_kernels": self.num_graph_kernels,
            "launch_cpu_ms": self.launch_cpu_ms,
            "sync_cpu_ms": self.sync_cpu_ms,
            "launch_delay": self.launch_delay.to_dict(),
            "short_kernel_us": SHORT_KERNEL_US,
            "num_short_kernels": self.num_short_kernels,
            "short_kernel_busy_share": self.short_kernel_busy_share,
            "longest_launch_ms": self.longest_launch_ms,
        }


def launch_stats(devices: Sequence[DeviceTrace], busy_ms: float) -> LaunchStats:
    """Launch statistics of every device; ``busy_ms`` is their summed busy time."""
    delays: list[F64] = []
    num_kernels = num_graph_kernels = num_short = 0
    short_us = 0.0
    for dev in devices:
        is_kernel = np.isin(dev.op_kind, _KERNEL_KINDS)
        dur = dev.op_end[is_kernel] - dev.op_start[is_kernel]
        num_kernels += int(is_kernel.sum())
        short = dur < SHORT_KERNEL_US
        num_short += int(short.sum())
        short_us += float(dur[short].sum())
        launch_of = call_of_op(dev)
        linked = launch_of >= 0
        graph_ops = linked.copy()
        if dev.call_kind.size:
            graph_ops &= dev.call_kind[np.maximum(launch_of, 0)] == CallKind.GRAPH
        num_graph_kernels += int((graph_ops & is_kernel).sum())
        # First GPU start per launch call, then the delay after the call returned.
        first_start = np.full(dev.call_start.size, np.inf)
        np.minimum.at(first_start, launch_of[linked], dev.op_start[linked])
        launched = np.isfinite(first_start) & (dev.call_kind != CallKind.SYNC)
        delays.append(first_start[launched] - dev.call_end[launched])
    # Calls are per file: a file with two devices lists them once for both.
    calls = {dev.source: dev for dev in devices}.values()
    return LaunchStats(
        num_kernels=num_kernels,
        num_kernel_launches=sum(int((d.call_kind == CallKind.LAUNCH).sum()) for d in calls),
        num_graph_launches=sum(int((d.call_kind == CallKind.GRAPH).sum()) for d in calls),
        num_graph_kernels=num_graph_kernels,
        launch_cpu_ms=sum(_call_ms(d, CallKind.LAUNCH, CallKind.GRAPH) for d in calls),
        sync_cpu_ms=sum(_call_ms(d, CallKind.SYNC) for d in calls),
        launch_delay=Distribution.of(np.concatenate(delays) if delays else np.zeros(0)),
        num_short_kernels=num_short,
        short_kernel_busy_share=short_us / 1000.0 / busy_ms if busy_ms > 0 else 0.0,
        longest_launch_ms=max(
            (_longest_ms(d, CallKind.LAUNCH, CallKind.GRAPH) for d in calls), default=0.0
        ),
    )


def _call_ms(dev: DeviceTrace, *kinds: CallKind) -> float:
    mask = np.isin(dev.call_kind, kinds)
    return float((dev.call_end[mask] - dev.call_start[mask]).sum()) / 1000.0


def _longest_ms(dev: DeviceTrace, *kinds: CallKind) -> float:
    mask = np.isin(dev.call_kind, kinds)
    return float((dev.call_end[mask] - dev.call_start[mask]).max(initial=0.0)) / 1000.0


def call_of_op(dev: DeviceTrace) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Index into the device's calls of the launch of each GPU operation, -1 when none."""
    has_corr = dev.call_corr >= 0
    call_idx = np.flatnonzero(has_corr & (dev.call_kind != CallKind.SYNC))
    order = np.argsort(dev.call_corr[call_idx], kind="stable")
    keys = dev.call_corr[call_idx][order]
    pos = np.searchsorted(keys, dev.op_corr)
    pos_ok = np.minimum(pos, max(keys.size - 1, 0))
    found = (keys.size > 0) & (dev.op_corr >= 0)
    if keys.size:
        found = found & (keys[pos_ok] == dev.op_corr)
    result = np.where(found, call_idx[order][pos_ok] if keys.size else -1, -1)
    return np.asarray(result, dtype=np.int64)
