"""Fleet plans as records: what ``plan capacity`` and ``plan autoscale`` find.

One definition serves both sides: the tuner's fleet planner builds these records, the CLI
prints their ``to_dict`` as ``--json`` and stores it, and the dashboard reads a stored result
back with ``from_dict``. Money is USD; rates are requests/s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slotune.collector.summary import Distribution


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """One pool of a layout.

    Attributes:
        pool: pool name; model, gpu: what its replicas run.
        request_share: share of the trace's requests it serves.
        peak_rate: requests/s it must carry at the peak.
        capacity_rps: one replica's highest rate with every SLO held.
        replicas: replicas at the peak, with headroom.
        gpus: replicas x tensor_parallel_size.
        cost_per_hour: gpus x the GPU's price.
    """

    pool: str
    model: str
    gpu: str
    request_share: float
    peak_rate: float
    capacity_rps: float
    replicas: int
    gpus: int
    cost_per_hour: float

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PoolPlan:
        return cls(
            pool=str(d["pool"]),
            model=str(d["model"]),
            gpu=str(d["gpu"]),
            request_share=float(d["request_share"]),
            peak_rate=float(d["peak_rate"]),
            capacity_rps=float(d["capacity_rps"]),
            replicas=int(d["replicas"]),
            gpus=int(d["gpus"]),
            cost_per_hour=float(d["cost_per_hour"]),
        )


@dataclass(frozen=True, slots=True)
class LayoutPlan:
    """A fleet layout: ``one-pool``, or ``split`` at ``threshold_tokens`` (input + output)."""

    layout: str
    threshold_tokens: float | None
    pools: tuple[PoolPlan, ...]
    cost_per_million_tokens: float

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pools)

    @property
    def cost_per_hour(self) -> float:
        return sum(p.cost_per_hour for p in self.pools)

    def to_dict(self) -> dict[str, Any]:
        return {
            "layout": self.layout,
            "threshold_tokens": self.threshold_tokens,
            "replicas": {p.pool: p.replicas for p in self.pools},
            "gpus": self.gpus,
            "cost_per_hour": self.cost_per_hour,
            "cost_per_million_tokens": self.cost_per_million_tokens,
            "pools": [p.to_dict() for p in self.pools],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LayoutPlan:
        threshold = d.get("threshold_tokens")
        return cls(
            layout=str(d["layout"]),
            threshold_tokens=None if threshold is None else float(threshold),
            pools=tuple(PoolPlan.from_dict(p) for p in d["pools"]),
            cost_per_million_tokens=float(d["cost_per_million_tokens"]),
        )


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    """The recommended layout and the one it beat.

    Attributes:
        peak_rate: requests/s at the trace's busiest minute (or ``--rate``).
        mean_rate: the trace's mean requests/s (what cost per token is computed at).
        headroom: spare capacity on top of the peak.
        one_pool: the cheapest single pool.
        split: the cheapest short/long split; None when no split met the SLOs.
        prices_as_of: date of the GPU price catalog.
    """

    peak_rate: float
    mean_rate: float
    headroom: float
    one_pool: LayoutPlan
    split: LayoutPlan | None
    prices_as_of: str

    @property
    def split_pays(self) -> bool:
        return self.split is not None and self.split.cost_per_hour < self.one_pool.cost_per_hour

    @property
    def best(self) -> LayoutPlan:
        return self.split if self.split_pays and self.split is not None else self.one_pool

    @property
    def chosen(self) -> str:
        """The recommended layout's name."""
        return self.best.layout

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "layout": best.layout,
            "replicas": {p.pool: p.replicas for p in best.pools},
            "gpus": best.gpus,
            "cost_per_hour": best.cost_per_hour,
            "cost_per_million_tokens": best.cost_per_million_tokens,
            "split_pays": self.split_pays,
            "peak_rate": self.peak_rate,
            "mean_rate": self.mean_rate,
            "headroom": self.headroom,
            "prices_as_of": self.prices_as_of,
            "one_pool": self.one_pool.to_dict(),
            "split": None if self.split is None else self.split.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CapacityPlan:
        split = d.get("split")
        return cls(
            peak_rate=float(d["peak_rate"]),
            mean_rate=float(d["mean_rate"]),
            headroom=float(d["headroom"]),
            one_pool=LayoutPlan.from_dict(d["one_pool"]),
            split=None if split is None else LayoutPlan.from_dict(split),
            prices_as_of=str(d["prices_as_of"]),
        )


@dataclass(frozen=True, slots=True)
class PoolCost:
    """What one SLO-met request costs on a pool: GPU price per hour / one replica's capacity."""

    pool: str
    cost_per_hour: float
    capacity_rps: float

    @property
    def cost_per_request(self) -> float:
        return self.cost_per_hour / self.capacity_rps / 3600 if self.capacity_rps else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "cost_per_hour": self.cost_per_hour,
            "capacity_rps": self.capacity_rps,
            "cost_per_request": self.cost_per_request,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PoolCost:
        return cls(str(d["pool"]), float(d["cost_per_hour"]), float(d["capacity_rps"]))


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """One replica added (``+1``, ready ``cold_start_s`` later) or drained (``-1``)."""

    time_s: float
    pool: str
    change: int
    group_replicas: int

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScaleEvent:
        return cls(float(d["time_s"]), str(d["pool"]), int(d["change"]), int(d["group_replicas"]))


@dataclass(frozen=True, slots=True)
class ScalingResult:
    """One scaling policy (or ``static``, the starting fleet kept) replayed on the trace.

    Attributes:
        slo_violations: completed requests that missed a per-request SLO.
        shed, failed: requests shed, and lost to failing replicas.
        breaker_ejections: the circuit breaker's ejections.
        gpu_hours: GPU-hours the fleet was up.
        max_replicas: the most replicas at once.
        goodput, slos_met, ttft_ms: the replay's goodput, SLO verdict and TTFT.
        events: every scaling event, in time order.
    """

    scaling: str
    slo_violations: int
    shed: int
    failed: int
    breaker_ejections: int
    gpu_hours: float
    max_replicas: int
    goodput: float
    slos_met: bool
    ttft_ms: Distribution
    events: tuple[ScaleEvent, ...]

    @property
    def grow_order(self) -> list[str]:
        """Pools in the order they first grew."""
        return self._order(+1)

    @property
    def shrink_order(self) -> list[str]:
        """Pools in the order they first shrank."""
        return self._order(-1)

    def _order(self, change: int) -> list[str]:
        out: list[str] = []
        for e in self.events:
            if e.change == change and e.pool not in out:
                out.append(e.pool)
        return out

    def timeline(self, start: int, end_s: float) -> tuple[tuple[float, int], ...]:
        """The fleet's replica count over time from ``start`` replicas, ``(seconds,
        replicas)`` at the start, just before and after every event and at ``end_s``; empty
        when the policy never scaled."""
        if not self.events:
            return ()
        points = [(0.0, start)]
        n = start
        for e in sorted(self.events, key=lambda e: e.time_s):
            points.append((e.time_s, n))  # the count holds until the event: a step, not a ramp
            n += e.change
            points.append((e.time_s, n))
        points.append((max(end_s, points[-1][0]), n))
        return tuple(points)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scaling": self.scaling,
            "slo_violations": self.slo_violations,
            "shed": self.shed,
            "failed": self.failed,
            "breaker_ejections": self.breaker_ejections,
            "gpu_hours": self.gpu_hours,
            "max_replicas": self.max_replicas,
            "goodput": self.goodput,
            "slos_met": self.slos_met,
            "ttft_ms": self.ttft_ms.to_dict(),
            "grow_order": self.grow_order,
            "shrink_order": self.shrink_order,
            "events": [e.to_dict() for e in self.events],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScalingResult:
        return cls(
            scaling=str(d["scaling"]),
            slo_violations=int(d["slo_violations"]),
            shed=int(d["shed"]),
            failed=int(d.get("failed", 0)),
            breaker_ejections=int(d.get("breaker_ejections", 0)),
            gpu_hours=float(d["gpu_hours"]),
            max_replicas=int(d["max_replicas"]),
            goodput=float(d["goodput"]),
            slos_met=bool(d["slos_met"]),
            ttft_ms=Distribution.from_dict(d["ttft_ms"]),
            events=tuple(ScaleEvent.from_dict(e) for e in d.get("events") or ()),
        )


@dataclass(frozen=True, slots=True)
class AutoscalePlan:
    """A ``plan autoscale`` replay: the pools' grow order by cost, then every policy's result.

    ``day_s`` is one day of the replayed trace (schedules repeat daily).
    """

    routing: str
    day_s: float
    costs: tuple[PoolCost, ...]
    results: tuple[ScalingResult, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "routing": self.routing,
            "day_s": self.day_s,
            "pool_costs": [c.to_dict() for c in self.costs],
            "policies": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AutoscalePlan:
        return cls(
            routing=str(d["routing"]),
            day_s=float(d["day_s"]),
            costs=tuple(PoolCost.from_dict(c) for c in d.get("pool_costs") or ()),
            results=tuple(ScalingResult.from_dict(p) for p in d["policies"]),
        )


@dataclass(frozen=True, slots=True)
class MarginResult:
    """One admission margin on the absorbable burst and on the overload.

    Attributes:
        margin: admit while predicted queueing <= margin x the TTFT budget.
        burst_shed_share: share of the absorbable burst's requests shed (wrongly); None
            when the fleet absorbs no burst.
        overload_shed_share: share of all requests shed under overload.
        overload_ttft_met: the admitted requests meet the TTFT SLOs under overload.
        overload_attainment: each SLO's attainment over the admitted requests, by name.
        overload_goodput: SLO-met requests/s under overload.
    """

    margin: float
    burst_shed_share: float | None
    overload_shed_share: float
    overload_ttft_met: bool
    overload_attainment: dict[str, float]
    overload_goodput: float

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MarginResult:
        burst = d.get("burst_shed_share")
        return cls(
            margin=float(d["margin"]),
            burst_shed_share=None if burst is None else float(burst),
            overload_shed_share=float(d["overload_shed_share"]),
            overload_ttft_met=bool(d["overload_ttft_met"]),
            overload_attainment={
                str(k): float(v) for k, v in (d.get("overload_attainment") or {}).items()
            },
            overload_goodput=float(d.get("overload_goodput", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class SheddingPlan:
    """The load-shedding analysis: burst factors (x the traffic) and the margins tried.

    ``recommended_margin`` is None when no margin both protects TTFT under the overload and
    wrongly sheds under ``wrong_shed_target`` of the absorbable burst.
    """

    routing: str
    ttft_budget_s: float
    burst_s: float
    absorbable_factor: float | None
    overload_factor: float
    wrong_shed_target: float
    margins: tuple[MarginResult, ...]
    recommended_margin: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "routing": self.routing,
            "ttft_budget_s": self.ttft_budget_s,
            "burst_s": self.burst_s,
            "absorbable_factor": self.absorbable_factor,
            "overload_factor": self.overload_factor,
            "wrong_shed_target": self.wrong_shed_target,
            "recommended_margin": self.recommended_margin,
            "margins": [m.to_dict() for m in self.margins],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SheddingPlan:
        return cls(
            routing=str(d["routing"]),
            ttft_budget_s=float(d["ttft_budget_s"]),
            burst_s=float(d["burst_s"]),
            absorbable_factor=_opt(d.get("absorbable_factor")),
            overload_factor=float(d["overload_factor"]),
            wrong_shed_target=float(d["wrong_shed_target"]),
            margins=tuple(MarginResult.from_dict(m) for m in d["margins"]),
            recommended_margin=_opt(d.get("recommended_margin")),
        )


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)
