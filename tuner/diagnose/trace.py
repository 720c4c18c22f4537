"""``diagnose trace``: where the GPU time of a profiler trace goes, and what to change.

The result's JSON shape (``TraceDiagnosis.to_dict``) is a contract (docs/diagnose.md)::

    {"kind": "trace", "source": ..., "overall": {split}, "windows": [{"name": ..., split}],
     "launch": {...}, "categories": {...}, "kernels": [...], "findings": [...]}

Windows are the ``ProfilerStep#N`` steps: the GPU-side annotation when the trace has one;
otherwise the span of the GPU work launched during the CPU-side step. Figures of several
ranks or devices are added (device-time).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.tuner.diagnose._findings import Finding, TuneContext
from slotune.tuner.diagnose._kernels import KernelRow, category_totals, kernel_rows
from slotune.tuner.diagnose._launch import LaunchStats, call_of_op, launch_stats
from slotune.tuner.diagnose._split import TimeSplit, split_windows
from slotune.tuner.diagnose._trace import DeviceTrace, load_trace
from slotune.tuner.diagnose._trace_rules import trace_findings

OVERALL = "overall"


@dataclass(frozen=True, slots=True)
class TraceDiagnosis:
    """The analysis of one trace (file or directory of per-rank files)."""

    source: str
    num_devices: int
    steps_on_gpu: bool
    memset_separate: bool
    overall: TimeSplit
    windows: tuple[TimeSplit, ...]
    launch: LaunchStats
    categories: dict[str, float]
    kernels: tuple[KernelRow, ...]
    findings: tuple[Finding, ...]
    timeline: tuple[tuple[float, float, int], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "trace",
            "source": self.source,
            "num_devices": self.num_devices,
            "step_source": "gpu_annotation" if self.steps_on_gpu else "cpu_annotation",
            "memset": "separate" if self.memset_separate else "compute",
            "overall": self.overall.to_dict(),
            "windows": [w.to_dict() for w in self.windows],
            "launch": self.launch.to_dict(),
            "categories": self.categories,
            "kernels": [k.to_dict() for k in self.kernels],
            "findings": [f.to_dict() for f in self.findings],
        }


def diagnose_trace(
    path: Path,
    *,
    memset_separate: bool = False,
    top: int = 20,
    context: TuneContext | None = None,
) -> TraceDiagnosis:
    """Split the GPU time of a trace, measure launch overhead, rank kernels, find causes.

    Args:
        path: a ``.json`` / ``.json.gz`` trace, or a directory of per-rank traces of one run.
        memset_separate: report memset apart from compute (default: counted as compute).
        top: how many kernels to list.
        context: ``slotune tune`` flags to put in the findings' tune commands.

    Raises:
        TraceFileError: bad input (the message names the file and what is missing).
        ConfigError: ``top`` below 0.
    """
    if top < 0:
        raise ConfigError(f"top {top}: the number of kernels to list is 0 or more")
    devices = load_trace(path)
    overall: TimeSplit | None = None
    windows: dict[str, TimeSplit] = {}
    for dev in devices:
        names, lo, hi = _windows(dev)
        splits = split_windows(dev, names, lo, hi, memset_separate=memset_separate)
        overall = splits[0] if overall is None else overall.plus(splits[0])
        for s in splits[1:]:
            windows[s.name] = windows[s.name].plus(s) if s.name in windows else s
    assert overall is not None  # load_trace returns at least one device or raises
    launch = launch_stats(devices, overall.busy_ms)
    rows = kernel_rows(devices, overall.busy_ms)
    return TraceDiagnosis(
        source=str(path),
        num_devices=len(devices),
        steps_on_gpu=all(d.steps_on_gpu for d in devices),
        memset_separate=memset_separate,
        overall=overall,
        windows=tuple(windows.values()),
        launch=launch,
        categories=category_totals(rows),
        kernels=tuple(rows[:top]),
        findings=tuple(trace_findings(overall, launch, context)),
        timeline=_timeline(devices[0]),
    )


def _windows(dev: DeviceTrace) -> tuple[list[str], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Names and GPU-time bounds (µs) of the whole trace then each step of one device."""
    names, lo, hi = [OVERALL], [float(dev.op_start.min())], [float(dev.op_end.max())]
    if dev.steps_on_gpu:
        for w in dev.windows:
            names.append(w.name)
            lo.append(w.start_us)
            hi.append(w.end_us)
    elif dev.windows:
        # A CPU step owns the GPU work its launches started; its GPU window spans that work.
        launch_of = call_of_op(dev)
        linked = launch_of >= 0
        launched_at = dev.call_start[launch_of[linked]]
        step_lo = np.array([w.start_us for w in dev.windows])
        step_hi = np.array([w.end_us for w in dev.windows])
        step = np.searchsorted(step_lo, launched_at, side="right") - 1
        inside = (step >= 0) & (launched_at <= step_hi[np.maximum(step, 0)])
        owner = step[inside]
        first = np.full(len(dev.windows), np.inf)
        last = np.full(len(dev.windows), -np.inf)
        np.minimum.at(first, owner, dev.op_start[linked][inside])
        np.maximum.at(last, owner, dev.op_end[linked][inside])
        for i in np.flatnonzero(np.isfinite(first)):
            names.append(dev.windows[i].name)
            lo.append(float(first[i]))
            hi.append(float(last[i]))
    return names, np.array(lo), np.array(hi)


_TIMELINE_MAX_OPS = 5000


def _timeline(dev: DeviceTrace) -> tuple[tuple[float, float, int], ...]:
    """The first device's operations as (start ms, end ms, kind), relative to its first one,
    for the HTML report's plot; the longest ones when there are too many to draw."""
    dur = dev.op_end - dev.op_start
    keep = np.argsort(-dur, kind="stable")[:_TIMELINE_MAX_OPS]
    keep.sort()
    t0 = float(dev.op_start.min())
    return tuple(
        (
            (float(dev.op_start[i]) - t0) / 1000.0,
            (float(dev.op_end[i]) - t0) / 1000.0,
            int(dev.op_kind[i]),
        )
        for i in keep
    )
