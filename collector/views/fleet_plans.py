"""Stored fleet results (``fleet simulate``, ``plan capacity``, ``plan autoscale``) as records.

The commands save their ``--json`` output in the ``diagnosis`` table under the kinds below
(docs/fleet.md, "Stored results"); these functions turn one row into typed records for the
dashboard's ``/fleet-plan`` page. A row whose result lacks a field (saved by another version)
is one :class:`ConfigError` naming the row, never a partial record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

from slotune.collector.errors import ConfigError
from slotune.collector.plans import AutoscalePlan, CapacityPlan, SheddingPlan
from slotune.collector.store import DiagnosisInfo, Store, list_diagnoses

FLEET_SIM = "fleet-sim"
FLEET_PLAN = "fleet-plan"
FLEET_AUTOSCALE = "fleet-autoscale"
FLEET_KINDS = (FLEET_SIM, FLEET_PLAN, FLEET_AUTOSCALE)
_LATENCIES = ("ttft", "itl", "tpot", "e2e")

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
R = TypeVar("R", bound="DataclassInstance")


@dataclass(frozen=True, slots=True)
class ReplicaLoad:
    """One simulated replica under one routing policy."""

    name: str
    pool: str
    num_requests: int
    busy_fraction: float
    queue_ms_mean: float
    queue_ms_p99: float
    prefix_hit_rate: float
    gpu_hours: float


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One routing policy of a ``fleet simulate`` run; latencies in ms, goodput in req/s."""

    policy: str
    p50_ms: Mapping[str, float | None]  # by latency: ttft, itl, tpot, e2e
    p99_ms: Mapping[str, float | None]
    goodput: float
    slos_met: bool
    prefix_hit_rate: float
    shed: int
    shed_share: float
    slo_violations: int
    gpu_hours: float
    replicas: tuple[ReplicaLoad, ...]


@dataclass(frozen=True, slots=True)
class StoredAutoscale:
    """A ``fleet-autoscale`` row: the replay, its load-shedding analysis when it ran, and
    each policy's replica timeline (in the plan's order) from the stored starting fleet."""

    plan: AutoscalePlan
    shedding: SheddingPlan | None
    timelines: tuple[tuple[tuple[float, int], ...], ...]


def fleet_results(store: Store, limit: int = 200) -> list[DiagnosisInfo]:
    """The stored fleet results of every kind, newest first."""
    rows = [d for kind in FLEET_KINDS for d in list_diagnoses(store, kind=kind, limit=limit)]
    rows.sort(key=lambda d: (d.created_at, d.id), reverse=True)
    return rows[:limit]


def _parsed(d: DiagnosisInfo, kind: str, parse: Callable[[DiagnosisInfo], T]) -> T:
    if d.kind != kind:
        raise ConfigError(f"stored result #{d.id} is a {d.kind} result, not {kind}")
    try:
        return parse(d)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConfigError(
            f"stored result #{d.id} ({d.kind}) lacks or mangles field {e}: "
            "run its command again to store it in this version's shape"
        ) from e


def sim_policies(d: DiagnosisInfo) -> list[PolicyResult]:
    """A ``fleet-sim`` row's policies, best goodput first (SLOs met before not)."""
    rows = _parsed(d, FLEET_SIM, _sim_policies)
    return sorted(rows, key=lambda p: (not p.slos_met, -p.goodput))


def _sim_policies(d: DiagnosisInfo) -> list[PolicyResult]:
    return [
        PolicyResult(
            policy=str(p["policy"]),
            p50_ms={m: _opt(p[f"{m}_ms"].get("p50")) for m in _LATENCIES},
            p99_ms={m: _opt(p[f"{m}_ms"].get("p99")) for m in _LATENCIES},
            goodput=float(p["goodput"]),
            slos_met=bool(p["slos_met"]),
            prefix_hit_rate=float(p["prefix_hit_rate"]),
            shed=int(p["shed"]),
            shed_share=float(p["shed_share"]),
            slo_violations=int(p["slo_violations"]),
            gpu_hours=float(p["gpu_hours"]),
            replicas=tuple(_record(ReplicaLoad, r) for r in p["replicas"]),
        )
        for p in d.result["policies"]
    ]


def capacity_plan(d: DiagnosisInfo) -> CapacityPlan:
    """A ``fleet-plan`` row."""
    return _parsed(d, FLEET_PLAN, lambda d: CapacityPlan.from_dict(d.result))


def autoscale_plan(d: DiagnosisInfo) -> StoredAutoscale:
    """A ``fleet-autoscale`` row."""
    return _parsed(d, FLEET_AUTOSCALE, _autoscale)


def _autoscale(d: DiagnosisInfo) -> StoredAutoscale:
    plan = AutoscalePlan.from_dict(d.result["autoscale"])
    # The starting fleet is the --pool replicas (NAME:REPLICAS:…); events are changes to it.
    start = sum(int(str(p).split(":", 4)[1]) for p in d.inputs.get("pools", []))
    end_s = plan.day_s * int(d.inputs.get("days") or 1)
    s = d.result.get("shedding")
    return StoredAutoscale(
        plan=plan,
        shedding=None if s is None else SheddingPlan.from_dict(s),
        timelines=tuple(r.timeline(start, end_s) for r in plan.results),
    )


_CASTS: dict[str, Callable[[Any], Any]] = {"str": str, "int": int, "float": float, "bool": bool}


def _record(cls: type[R], m: Mapping[str, Any]) -> R:
    """A flat record of str / int / float / bool fields from its JSON object, each cast."""
    return cls(**{f.name: _CASTS[str(f.type)](m[f.name]) for f in fields(cls)})


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)
