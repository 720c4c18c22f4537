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
from slotune.collector.store import DiagnosisInfo, Store, list_diagnoses
from slotune.collector.summary import Distribution

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
class PoolPlan:
    """One pool of a priced layout."""

    pool: str
    model: str
    gpu: str
    request_share: float
    peak_rate: float
    capacity_rps: float
    replicas: int
    gpus: int
    cost_per_hour: float


@dataclass(frozen=True, slots=True)
class LayoutPlan:
    """``one-pool`` or ``split`` (long/short pools at ``threshold_tokens``)."""

    layout: str
    threshold_tokens: float | None
    gpus: int
    cost_per_hour: float
    cost_per_million_tokens: float
    pools: tuple[PoolPlan, ...]


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    """A ``plan capacity`` result: the chosen layout and both layouts priced (USD)."""

    chosen: str
    split_pays: bool
    peak_rate: float
    mean_rate: float
    headroom: float
    prices_as_of: str
    one_pool: LayoutPlan
    split: LayoutPlan | None


@dataclass(frozen=True, slots=True)
class ScalingResult:
    """One scaling policy of a ``plan autoscale`` replay.

    ``timeline`` is the fleet's replica count over time, ``(seconds, replicas)`` at the start,
    just before and after every scaling event; empty when the policy never scaled.
    """

    scaling: str
    slo_violations: int
    shed: int
    gpu_hours: float
    max_replicas: int
    goodput: float
    slos_met: bool
    ttft_p99_ms: float | None
    grow_order: tuple[str, ...]
    shrink_order: tuple[str, ...]
    timeline: tuple[tuple[float, int], ...]


@dataclass(frozen=True, slots=True)
class MarginTrial:
    """One ``slo-aware`` margin replayed on the absorbable burst and on the overload."""

    margin: float
    burst_shed_share: float  # wrongly shed: the fleet absorbs this burst within the SLOs
    overload_shed_share: float
    overload_ttft_met: bool


@dataclass(frozen=True, slots=True)
class SheddingAdvice:
    """The load-shedding analysis: burst factors (× the traffic) and the margins tried.

    ``recommended_margin`` is None when no margin both protects TTFT under the overload and
    wrongly sheds under the target share of the absorbable burst.
    """

    routing: str
    burst_s: float
    absorbable_factor: float | None
    overload_factor: float | None
    wrong_shed_target: float
    recommended_margin: float | None
    margins: tuple[MarginTrial, ...]


@dataclass(frozen=True, slots=True)
class AutoscalePlan:
    routing: str
    policies: tuple[ScalingResult, ...]
    shedding: SheddingAdvice | None


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
    return _parsed(d, FLEET_PLAN, _capacity_plan)


def _capacity_plan(d: DiagnosisInfo) -> CapacityPlan:
    r = d.result
    split = r.get("split")
    return CapacityPlan(
        chosen=str(r["layout"]),
        split_pays=bool(r["split_pays"]),
        peak_rate=float(r["peak_rate"]),
        mean_rate=float(r["mean_rate"]),
        headroom=float(r["headroom"]),
        prices_as_of=str(r["prices_as_of"]),
        one_pool=_layout(r["one_pool"]),
        split=None if split is None else _layout(split),
    )


def _layout(r: Mapping[str, Any]) -> LayoutPlan:
    return LayoutPlan(
        layout=str(r["layout"]),
        threshold_tokens=_opt(r.get("threshold_tokens")),
        gpus=int(r["gpus"]),
        cost_per_hour=float(r["cost_per_hour"]),
        cost_per_million_tokens=float(r["cost_per_million_tokens"]),
        pools=tuple(_record(PoolPlan, p) for p in r["pools"]),
    )


def autoscale_plan(d: DiagnosisInfo) -> AutoscalePlan:
    """A ``fleet-autoscale`` row."""
    return _parsed(d, FLEET_AUTOSCALE, _autoscale_plan)


def _autoscale_plan(d: DiagnosisInfo) -> AutoscalePlan:
    a = d.result["autoscale"]
    # The starting fleet is the --pool replicas (NAME:REPLICAS:…); events are changes to it.
    start = sum(int(str(p).split(":", 4)[1]) for p in d.inputs.get("pools", []))
    end_s = float(a["day_s"]) * int(d.inputs.get("days") or 1)
    s = d.result.get("shedding")
    return AutoscalePlan(
        routing=str(a["routing"]),
        policies=tuple(
            ScalingResult(
                scaling=str(p["scaling"]),
                slo_violations=int(p["slo_violations"]),
                shed=int(p["shed"]),
                gpu_hours=float(p["gpu_hours"]),
                max_replicas=int(p["max_replicas"]),
                goodput=float(p["goodput"]),
                slos_met=bool(p["slos_met"]),
                ttft_p99_ms=Distribution.from_dict(p["ttft_ms"]).p99,
                grow_order=tuple(str(x) for x in p["grow_order"]),
                shrink_order=tuple(str(x) for x in p["shrink_order"]),
                timeline=_timeline(start, p.get("events") or [], end_s),
            )
            for p in a["policies"]
        ),
        shedding=None if s is None else _shedding(s),
    )


def _timeline(
    start: int, events: list[Mapping[str, Any]], end_s: float
) -> tuple[tuple[float, int], ...]:
    if not events:
        return ()
    points = [(0.0, start)]
    n = start
    for e in sorted(events, key=lambda e: float(e["time_s"])):
        t = float(e["time_s"])
        points.append((t, n))  # the count holds until the event: a step, not a ramp
        n += int(e["change"])
        points.append((t, n))
    points.append((max(end_s, points[-1][0]), n))
    return tuple(points)


def _shedding(s: Mapping[str, Any]) -> SheddingAdvice:
    return SheddingAdvice(
        routing=str(s["routing"]),
        burst_s=float(s["burst_s"]),
        absorbable_factor=_opt(s.get("absorbable_factor")),
        overload_factor=_opt(s.get("overload_factor")),
        wrong_shed_target=float(s["wrong_shed_target"]),
        recommended_margin=_opt(s.get("recommended_margin")),
        margins=tuple(_record(MarginTrial, m) for m in s["margins"]),
    )


_CASTS: dict[str, Callable[[Any], Any]] = {"str": str, "int": int, "float": float, "bool": bool}


def _record(cls: type[R], m: Mapping[str, Any]) -> R:
    """A flat record of str / int / float / bool fields from its JSON object, each cast."""
    return cls(**{f.name: _CASTS[str(f.type)](m[f.name]) for f in fields(cls)})


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)
