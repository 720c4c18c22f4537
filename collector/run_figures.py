"""The figures a run summary carries beside its latencies: one record per kind of run.

A benchmark knows its load (target, offered and achieved rates, the requests it sent); a
simulated engine knows its insides (prefix hits, KV blocks, where step time went); a simulated
fleet knows what it shed, lost and cost; an engine scraped during a run gives its peaks. Each
record flattens into the summary JSON under the keys that JSON has always had, and reads back
from it with ``from_dict``; keys a summary stored by an older version lacks read as 0 or None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SendLag:
    """How late the load generator sent requests against their schedule, in ms."""

    p50: float
    p99: float
    max: float

    def to_dict(self) -> dict[str, Any]:
        return {"p50": self.p50, "p99": self.p99, "max": self.max}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SendLag:
        return cls(float(d["p50"]), float(d["p99"]), float(d["max"]))


@dataclass(frozen=True, slots=True)
class LoadFigures:
    """A benchmark's load: rates in req/s (``target_rate`` may be ``inf``: as fast as possible).

    ``num_sent`` counts every request that reached the server, warm-up and cool-down included:
    what it was billed for.
    """

    target_rate: float | None
    offered_rate: float | None
    achieved_rate: float | None
    send_lag_ms: SendLag | None
    num_warmup: int
    num_cooldown: int
    num_cooldown_cancelled: int
    num_sent: int
    usage_missing: int
    client_token_mismatches: int

    def to_dict(self) -> dict[str, Any]:
        target = self.target_rate
        return {
            "target_rate": "inf" if target is not None and math.isinf(target) else target,
            "offered_rate": self.offered_rate,
            "achieved_rate": self.achieved_rate,
            "send_lag_ms": None if self.send_lag_ms is None else self.send_lag_ms.to_dict(),
            "num_warmup": self.num_warmup,
            "num_cooldown": self.num_cooldown,
            "num_cooldown_cancelled": self.num_cooldown_cancelled,
            "num_sent": self.num_sent,
            "usage_missing": self.usage_missing,
            "client_token_mismatches": self.client_token_mismatches,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoadFigures:
        lag = d.get("send_lag_ms")
        return cls(
            target_rate=_opt(d.get("target_rate")),
            offered_rate=_opt(d.get("offered_rate")),
            achieved_rate=_opt(d.get("achieved_rate")),
            send_lag_ms=None if lag is None else SendLag.from_dict(lag),
            num_warmup=int(d.get("num_warmup", 0)),
            num_cooldown=int(d.get("num_cooldown", 0)),
            num_cooldown_cancelled=int(d.get("num_cooldown_cancelled", 0)),
            num_sent=int(d.get("num_sent", 0)),
            usage_missing=int(d.get("usage_missing", 0)),
            client_token_mismatches=int(d.get("client_token_mismatches", 0)),
        )


@dataclass(frozen=True, slots=True)
class StepBreakdown:
    """Where the emulated GPU's time went, summed over all steps.

    ``compute_s``: FLOP-bound kernels; ``memory_s``: bandwidth-bound kernels (weights and KV
    reads); ``communication_s``: tensor-parallel collectives; ``overhead_s``: host time and
    unhidden kernel launches.
    """

    num_steps: int
    busy_s: float
    compute_s: float
    memory_s: float
    communication_s: float
    overhead_s: float

    def to_dict(self) -> dict[str, float | int]:
        busy = self.busy_s or 1.0
        return {
            "num_steps": self.num_steps,
            "busy_s": self.busy_s,
            "compute_s": self.compute_s,
            "memory_s": self.memory_s,
            "communication_s": self.communication_s,
            "overhead_s": self.overhead_s,
            "compute_frac": self.compute_s / busy,
            "memory_frac": self.memory_s / busy,
            "communication_frac": self.communication_s / busy,
            "overhead_frac": self.overhead_s / busy,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepBreakdown:
        return cls(
            num_steps=int(d["num_steps"]),
            busy_s=float(d["busy_s"]),
            compute_s=float(d["compute_s"]),
            memory_s=float(d["memory_s"]),
            communication_s=float(d["communication_s"]),
            overhead_s=float(d["overhead_s"]),
        )


@dataclass(frozen=True, slots=True)
class SimEngineFigures:
    """A simulated engine's insides over one run (``kv_warning``: the KV cache is too small)."""

    prefix_hit_rate: float
    preemptions: int
    kv_blocks: int
    kv_tokens: int
    step_time_breakdown: StepBreakdown
    kv_warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "prefix_hit_rate": self.prefix_hit_rate,
            "preemptions": self.preemptions,
            "kv_blocks": self.kv_blocks,
            "kv_tokens": self.kv_tokens,
            "step_time_breakdown": self.step_time_breakdown.to_dict(),
        }
        if self.kv_warning:
            out["kv_warning"] = self.kv_warning
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SimEngineFigures:
        return cls(
            prefix_hit_rate=float(d["prefix_hit_rate"]),
            preemptions=int(d["preemptions"]),
            kv_blocks=int(d["kv_blocks"]),
            kv_tokens=int(d["kv_tokens"]),
            step_time_breakdown=StepBreakdown.from_dict(d["step_time_breakdown"]),
            kv_warning=d.get("kv_warning"),
        )


@dataclass(frozen=True, slots=True)
class FleetFigures:
    """A simulated fleet over one run.

    Attributes:
        shed: requests refused by load shedding (``shed_share`` of all).
        slo_violations: completed requests that missed a per-request SLO.
        failed: requests lost to failing replicas (cut, refused everywhere, timed out: 5xx).
        breaker_ejections, refused_attempts: the circuit breaker's ejections and the
            attempts it refused (0 without health checks).
    """

    prefix_hit_rate: float
    preemptions: int
    shed: int
    shed_share: float
    slo_violations: int
    gpu_hours: float
    failed: int
    breaker_ejections: int
    refused_attempts: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix_hit_rate": self.prefix_hit_rate,
            "preemptions": self.preemptions,
            "shed": self.shed,
            "shed_share": self.shed_share,
            "slo_violations": self.slo_violations,
            "gpu_hours": self.gpu_hours,
            "failed": self.failed,
            "breaker_ejections": self.breaker_ejections,
            "refused_attempts": self.refused_attempts,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FleetFigures:
        return cls(
            prefix_hit_rate=float(d["prefix_hit_rate"]),
            preemptions=int(d["preemptions"]),
            shed=int(d["shed"]),
            shed_share=float(d["shed_share"]),
            slo_violations=int(d["slo_violations"]),
            gpu_hours=float(d["gpu_hours"]),
            failed=int(d.get("failed", 0)),
            breaker_ejections=int(d.get("breaker_ejections", 0)),
            refused_attempts=int(d.get("refused_attempts", 0)),
        )


@dataclass(frozen=True, slots=True)
class ScrapedEngineFigures:
    """What a real engine's ``/metrics`` said during one run (``engine_*`` in the JSON)."""

    num_samples: int
    kv_usage_max: float | None
    kv_usage_mean: float | None
    waiting_max: float | None
    running_max: float | None
    prefix_hit_rate: float | None
    preemptions: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine_samples": self.num_samples,
            "engine_kv_usage_max": self.kv_usage_max,
            "engine_kv_usage_mean": self.kv_usage_mean,
            "engine_waiting_max": self.waiting_max,
            "engine_running_max": self.running_max,
            "engine_prefix_hit_rate": self.prefix_hit_rate,
            "engine_preemptions": self.preemptions,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScrapedEngineFigures:
        return cls(
            num_samples=int(d["engine_samples"]),
            kv_usage_max=_opt(d.get("engine_kv_usage_max")),
            kv_usage_mean=_opt(d.get("engine_kv_usage_mean")),
            waiting_max=_opt(d.get("engine_waiting_max")),
            running_max=_opt(d.get("engine_running_max")),
            prefix_hit_rate=_opt(d.get("engine_prefix_hit_rate")),
            preemptions=_opt(d.get("engine_preemptions")),
        )


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)
