"""``diagnose sim``: a configuration explained through the simulator, in the words of a
measured one.

The simulator prices every engine step as compute (FLOP-bound kernels), memory (bandwidth-
bound kernels), communication (tensor-parallel collectives) and overhead (host scheduling and
unhidden kernel launches). Mapped onto the trace split: compute + memory are kernels
(``compute_ms``), communication is exposed (nothing overlaps it in the model), overhead is GPU
idle while the host works (``host_idle_ms``), the rest of the run is idle. The engine state
(KV usage, queue, preemptions, prefix hits) feeds the same rules as ``diagnose live``.

JSON (``SimDiagnosis.to_dict``)::

    {"kind": "simulated", "config": {...}, "workload": ..., "overall": {split},
     "windows": [], "step_split": {...}, "figures": {...}, "latency_ms": {...},
     "findings": [...]}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from slotune.collector.workload import Trace
from slotune.tuner.diagnose._engine_rules import EngineFigures, engine_findings
from slotune.tuner.diagnose._findings import Finding, Severity, TuneContext
from slotune.tuner.diagnose._split import TimeSplit
from slotune.tuner.diagnose._trace_rules import trace_findings
from slotune.tuner.sim import SimResult, simulate
from slotune.tuner.sim.config import EngineConfig


@dataclass(frozen=True, slots=True)
class SimDiagnosis:
    config: dict[str, Any]
    workload: str
    overall: TimeSplit
    step_split: dict[str, float | int]
    figures: EngineFigures
    latency_ms: dict[str, float | None]
    findings: tuple[Finding, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "simulated",
            "config": dict(self.config),
            "workload": self.workload,
            "overall": self.overall.to_dict(),
            "windows": [],
            "step_split": dict(self.step_split),
            "figures": self.figures.to_dict(),
            "latency_ms": dict(self.latency_ms),
            "findings": [f.to_dict() for f in self.findings],
        }


def diagnose_simulated(
    config: EngineConfig,
    trace: Trace,
    *,
    context: TuneContext | None = None,
    concurrency: int | None = None,
) -> SimDiagnosis:
    """Simulate ``trace`` on ``config`` (in a closed loop of ``concurrency`` requests when
    given) and explain where the time goes."""
    result = simulate(config, trace, concurrency=concurrency)
    overall = simulated_split(result)
    figures = simulated_figures(result)
    split_found = trace_findings(overall, None, context)
    engine_found = engine_findings(figures, context)
    codes = {f.code for f in split_found}
    merged = split_found + [f for f in engine_found if f.code not in codes]
    # One finding per cause; one "healthy" finding, only when neither view found a problem.
    problems = [f for f in merged if f.severity is not Severity.OK]
    findings = problems or merged[:1]
    summary = result.summary.to_dict()
    return SimDiagnosis(
        config=dict(result.config),
        workload=trace.name,
        overall=overall,
        step_split=result.breakdown.to_dict(),
        figures=figures,
        latency_ms={
            f"{metric}_{q}": summary[f"{metric}_ms"][q]
            for metric in ("ttft", "itl", "e2e")
            for q in ("p50", "p99")
        },
        findings=tuple(findings),
    )


def simulated_split(result: SimResult) -> TimeSplit:
    """The simulator's step split as the trace split of the whole run."""
    b = result.breakdown
    total_ms = result.summary.duration_s * 1000.0
    kernels_ms = (b.compute_s + b.memory_s) * 1000.0
    comm_ms = b.communication_s * 1000.0
    busy_ms = min(kernels_ms + comm_ms, total_ms)
    return TimeSplit(
        name="overall",
        total_ms=total_ms,
        busy_ms=busy_ms,
        compute_ms=kernels_ms,
        exposed_memcpy_ms=0.0,
        overlapped_memcpy_ms=0.0,
        exposed_comm_ms=comm_ms,
        overlapped_comm_ms=0.0,
        idle_ms=total_ms - busy_ms,
        host_idle_ms=b.overhead_s * 1000.0,
    )


def simulated_figures(result: SimResult) -> EngineFigures:
    """The engine state of a simulated run, as ``diagnose live`` reads a real one."""
    s = result.series
    duration = result.summary.duration_s
    t = result.timings
    queued = [x.queued_s for x in t if x.queued_s is not None]
    prefill = [
        x.first_token_s - x.scheduled_s
        for x in t
        if x.first_token_s is not None and x.scheduled_s is not None
    ]
    decode = [
        x.finished_s - x.first_token_s
        for x in t
        if x.finished_s is not None and x.first_token_s is not None
    ]
    b = result.breakdown
    summary = result.summary.to_dict()
    hit_rate = float(summary["prefix_hit_rate"])
    step_tokens = summary["total_input_tokens"] * (1 - hit_rate) + summary["total_output_tokens"]
    queries = s.prefix_queries[-1] if s.prefix_queries else 0
    return EngineFigures(
        kv_usage=_mean(s.kv_usage),
        requests_running=_mean(s.num_running),
        requests_waiting=_mean(s.num_waiting),
        preemptions_per_min=(s.preemptions[-1] if s.preemptions else 0) / duration * 60.0
        if duration > 0
        else None,
        prefix_hit_rate=s.prefix_hits[-1] / queries if queries else None,
        gpu_busy=(b.compute_s + b.memory_s + b.communication_s) / duration
        if duration > 0
        else None,
        gpu_busy_source="simulator",
        queue_s=_mean(queued),
        prefill_s=_mean(prefill),
        decode_s=_mean(decode),
        iteration_tokens=step_tokens / b.num_steps if b.num_steps else None,
    )


def _mean(values: Any) -> float | None:
    return float(np.mean(values)) if len(values) else None
