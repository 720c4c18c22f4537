"""The simulator run on both sides of a setting, to give a recommendation its numbers.

Each comparison replays the same slice of the trace through the engine simulator with one
parameter changed (prefix caching on/off, chunked prefill on/off, a smaller token budget) and
keeps the latencies and cache figures a finding needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slotune.collector.workload import Trace
from slotune.tuner.sim import simulate
from slotune.tuner.sim.config import config_from_params


@dataclass(frozen=True, slots=True)
class SettingRun:
    """One simulated run of the trace slice with ``params`` over the engine's defaults."""

    label: str
    params: dict[str, Any]
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    e2e_p50_ms: float | None
    prefix_hit_rate: float
    preemptions: int
    kv_tokens: int
    prefill_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "params": dict(self.params),
            "ttft_p50_ms": self.ttft_p50_ms,
            "ttft_p99_ms": self.ttft_p99_ms,
            "itl_p99_ms": self.itl_p99_ms,
            "e2e_p50_ms": self.e2e_p50_ms,
            "prefix_hit_rate": self.prefix_hit_rate,
            "preemptions": self.preemptions,
            "kv_tokens": self.kv_tokens,
            "prefill_tokens": self.prefill_tokens,
        }


@dataclass(frozen=True, slots=True)
class SimTarget:
    """Which engine, model and GPU the simulator stands in for."""

    engine: str = "vllm"
    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"


def run_setting(trace: Trace, target: SimTarget, label: str, params: dict[str, Any]) -> SettingRun:
    """Simulate ``trace`` with ``params`` (engine names) over the engine's defaults."""
    config = config_from_params(target.engine, target.model, target.gpu, params)
    summary = simulate(config, trace).summary.to_dict()
    ttft, itl, e2e = summary["ttft_ms"], summary["itl_ms"], summary["e2e_ms"]
    hit_rate = float(summary["prefix_hit_rate"])
    total_input = int(summary["total_input_tokens"])
    return SettingRun(
        label=label,
        params=dict(params),
        ttft_p50_ms=ttft["p50"],
        ttft_p99_ms=ttft["p99"],
        itl_p99_ms=itl["p99"],
        e2e_p50_ms=e2e["p50"],
        prefix_hit_rate=hit_rate,
        preemptions=int(summary["preemptions"]),
        kv_tokens=int(summary["kv_tokens"]),
        prefill_tokens=round(total_input * (1.0 - hit_rate)),
    )
