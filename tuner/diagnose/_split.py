"""Where a device's time goes in a window: compute, memcpy and communication (exposed or
overlapped), idle.

All streams of a device are merged into one busy timeline. Priority decides what a moment of
overlap counts as, as in TraceLens: compute > communication > memcpy (> memset when it is
reported apart). "Exposed" memcpy is memcpy time with neither compute nor communication
running; "exposed" communication has no compute running. So
``busy = compute + exposed_comm + exposed_memcpy (+ exposed_memset)`` and
``total = busy + idle``. Memset counts as compute by default (TraceLens does the same);
``memset_separate`` reports it apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slotune.tuner.diagnose._intervals import F64, Intervals, covered, union
from slotune.tuner.diagnose._trace import MEMCPY_KINDS, CallKind, DeviceTrace, OpKind

DIRECTION_NAMES = {
    OpKind.HTOD: "HtoD",
    OpKind.DTOH: "DtoH",
    OpKind.DTOD: "DtoD",
    OpKind.PTOP: "PtoP",
    OpKind.MEMCPY_OTHER: "other",
}
_US_PER_MS = 1000.0


@dataclass(frozen=True, slots=True)
class TransferSplit:
    """One memcpy direction in a window."""

    exposed_ms: float
    overlapped_ms: float
    num_bytes: float

    def to_dict(self) -> dict[str, Any]:
        total_s = (self.exposed_ms + self.overlapped_ms) / 1000.0
        return {
            "exposed_ms": self.exposed_ms,
            "overlapped_ms": self.overlapped_ms,
            "bytes": self.num_bytes,
            "gb_per_s": self.num_bytes / total_s / 1e9 if total_s > 0 else None,
        }

    def plus(self, other: TransferSplit) -> TransferSplit:
        return TransferSplit(
            self.exposed_ms + other.exposed_ms,
            self.overlapped_ms + other.overlapped_ms,
            self.num_bytes + other.num_bytes,
        )


@dataclass(frozen=True, slots=True)
class TimeSplit:
    """The time split of one window (a profiler step, or the whole trace), in ms.

    Attributes:
        host_idle_ms: idle time while the CPU was inside a launch or synchronise call: the
            GPU waited on the host.
        exposed_memset_ms: None unless memset is reported apart from compute.
    """

    name: str
    total_ms: float
    busy_ms: float
    compute_ms: float
    exposed_memcpy_ms: float
    overlapped_memcpy_ms: float
    exposed_comm_ms: float
    overlapped_comm_ms: float
    idle_ms: float
    host_idle_ms: float
    exposed_memset_ms: float | None = None
    memcpy: dict[str, TransferSplit] = field(default_factory=dict)

    def plus(self, other: TimeSplit) -> TimeSplit:
        """Two devices' (or ranks') splits of the same window, added."""
        memset = (
            None
            if self.exposed_memset_ms is None
            else self.exposed_memset_ms + (other.exposed_memset_ms or 0.0)
        )
        memcpy = dict(self.memcpy)
        for d, t in other.memcpy.items():
            memcpy[d] = memcpy[d].plus(t) if d in memcpy else t
        return TimeSplit(
            self.name,
            self.total_ms + other.total_ms,
            self.busy_ms + other.busy_ms,
            self.compute_ms + other.compute_ms,
            self.exposed_memcpy_ms + other.exposed_memcpy_ms,
            self.overlapped_memcpy_ms + other.overlapped_memcpy_ms,
            self.exposed_comm_ms + other.exposed_comm_ms,
            self.overlapped_comm_ms + other.overlapped_comm_ms,
            self.idle_ms + other.idle_ms,
            self.host_idle_ms + other.host_idle_ms,
            memset,
            memcpy,
        )

    def share(self, ms: float) -> float:
        """``ms`` as a fraction of this window's total time."""
        return ms / self.total_ms if self.total_ms > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "total_ms": self.total_ms,
            "busy_ms": self.busy_ms,
            "compute_ms": self.compute_ms,
            "exposed_memcpy_ms": self.exposed_memcpy_ms,
            "overlapped_memcpy_ms": self.overlapped_memcpy_ms,
            "exposed_comm_ms": self.exposed_comm_ms,
            "overlapped_comm_ms": self.overlapped_comm_ms,
            "idle_ms": self.idle_ms,
            "host_idle_ms": self.host_idle_ms,
        }
        if self.exposed_memset_ms is not None:
            out["exposed_memset_ms"] = self.exposed_memset_ms
        out["memcpy"] = {d: t.to_dict() for d, t in self.memcpy.items()}
        return out


def split_windows(
    dev: DeviceTrace, names: list[str], lo: F64, hi: F64, *, memset_separate: bool
) -> list[TimeSplit]:
    """The split of each window ``[lo[i], hi[i]]`` (µs) of one device."""

    def ops(*kinds: OpKind) -> Intervals:
        mask = np.isin(dev.op_kind, kinds)
        return dev.op_start[mask], dev.op_end[mask]

    def measure(*parts: Intervals) -> F64:
        return covered(union(parts), lo, hi)

    compute_parts = (
        [ops(OpKind.COMPUTE)] if memset_separate else [ops(OpKind.COMPUTE, OpKind.MEMSET)]
    )
    comm, memcpy, memset = ops(OpKind.COMM), ops(*MEMCPY_KINDS), ops(OpKind.MEMSET)
    compute = measure(*compute_parts)
    with_comm = measure(*compute_parts, comm)
    with_memcpy = measure(*compute_parts, comm, memcpy)
    busy_parts = [*compute_parts, comm, memcpy, memset]
    busy = measure(*busy_parts)
    comm_all, memcpy_all = measure(comm), measure(memcpy)
    launch = np.isin(dev.call_kind, (CallKind.LAUNCH, CallKind.GRAPH, CallKind.SYNC))
    host = (dev.call_start[launch], dev.call_end[launch])
    # Host calls during idle = |host ∪ busy| - |busy| (what the calls add to the busy set).
    host_idle = measure(host, *busy_parts) - busy
    directions = {}
    for kind in MEMCPY_KINDS:
        one = ops(kind)
        if one[0].size == 0:
            continue
        exposed = measure(*compute_parts, comm, one) - with_comm
        num_bytes = _sum_starting_in(one[0], dev.op_bytes[dev.op_kind == kind], lo, hi)
        directions[DIRECTION_NAMES[kind]] = (exposed, measure(one) - exposed, num_bytes)
    total = hi - lo
    out = []
    for i, name in enumerate(names):
        ms = _US_PER_MS
        out.append(
            TimeSplit(
                name=name,
                total_ms=float(total[i]) / ms,
                busy_ms=float(busy[i]) / ms,
                compute_ms=float(compute[i]) / ms,
                exposed_memcpy_ms=float(with_memcpy[i] - with_comm[i]) / ms,
                overlapped_memcpy_ms=float(memcpy_all[i] - (with_memcpy[i] - with_comm[i])) / ms,
                exposed_comm_ms=float(with_comm[i] - compute[i]) / ms,
                overlapped_comm_ms=float(comm_all[i] - (with_comm[i] - compute[i])) / ms,
                idle_ms=float(total[i] - busy[i]) / ms,
                host_idle_ms=float(host_idle[i]) / ms,
                exposed_memset_ms=float(busy[i] - with_memcpy[i]) / ms if memset_separate else None,
                memcpy={
                    d: TransferSplit(float(e[i]) / ms, float(o[i]) / ms, float(b[i]))
                    for d, (e, o, b) in directions.items()
                },
            )
        )
    return out


def _sum_starting_in(start: F64, values: F64, lo: F64, hi: F64) -> F64:
    """Sum of ``values`` whose ``start`` lies in each window ``[lo[i], hi[i])``."""
    order = np.argsort(start, kind="stable")
    cum = np.concatenate(([0.0], np.cumsum(values[order])))
    sorted_start = start[order]
    first = np.searchsorted(sorted_start, lo, side="left")
    stop = np.searchsorted(sorted_start, hi, side="left")
    return np.asarray(cum[stop] - cum[first], dtype=np.float64)
