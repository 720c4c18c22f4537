"""Compare scaling policies on one replayed trace: SLO violations, shed, GPU-hours, order.

Each policy (and ``static``, the starting fleet kept as it is) replays the same trace on
the fleet simulator with the same routing policy; the pools' order — cheapest capacity per
SLO-met request first — is measured once, from each pool's simulated capacity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from slotune.collector.plans import AutoscalePlan as AutoscalePlan
from slotune.collector.plans import PoolCost, ScaleEvent, ScalingResult
from slotune.collector.slo import SLO
from slotune.collector.workload import Trace
from slotune.tuner.fleet.autoscale import Autoscaler, ScalingPolicy, ScalingSettings
from slotune.tuner.fleet.capacity import replica_capacity
from slotune.tuner.fleet.health import HealthSettings, Outage
from slotune.tuner.fleet.pools import PoolSpec, check_unique
from slotune.tuner.fleet.prices import GpuPrices
from slotune.tuner.fleet.registry import policy_from_name
from slotune.tuner.fleet.simulator import (
    FleetResult,
    ReplayProgress,
    policy_context,
    simulate_fleet,
)

STATIC = "static"
_SAMPLE_REQUESTS = 500


def pool_costs(
    pools: Sequence[PoolSpec], trace: Trace, slos: Sequence[SLO], prices: GpuPrices, seed: int = 0
) -> list[PoolCost]:
    """Each pool's cost per SLO-met request, cheapest first."""
    costs = []
    for p in pools:
        capacity = (
            replica_capacity(p, trace, slos, sample_requests=_SAMPLE_REQUESTS, seed=seed)
            if slos
            else 1.0  # without SLOs, price per replica-hour alone orders the pools
        )
        costs.append(PoolCost(p.name, p.gpus_per_replica * prices.of(p.gpu), capacity))
    return sorted(costs, key=lambda c: c.cost_per_request)


def plan_autoscale(
    pools: Sequence[PoolSpec],
    trace: Trace,
    scaling: Sequence[ScalingPolicy],
    settings: ScalingSettings,
    prices: GpuPrices,
    *,
    routing: str = "least-requests",
    slos: Sequence[SLO] = (),
    day_s: float | None = None,
    seed: int = 0,
    outages: Sequence[Outage] = (),
    health: HealthSettings | None = None,
    progress: ReplayProgress | None = None,
) -> AutoscalePlan:
    """Replay ``trace`` under each scaling policy and under the static starting fleet.

    Args:
        pools: the starting fleet (each pool's ``replicas``) and what can be added.
        trace: the replayed arrivals (already shaped: days, day curve, flash crowds).
        scaling: the scaling policies to compare.
        settings: cold start, cool-down, tick and bounds.
        prices: GPU prices, for the grow/shrink order.
        routing: the routing policy spec in front of the fleet.
        slos: SLOs for violations and goodput.
        day_s: one day of the trace (schedules repeat daily); default the whole trace.
        seed: seed of the capacity measurements.
        outages: replicas of the starting fleet failing during the replay.
        health: the proxy's circuit breaker settings facing them.
        progress: told what runs and how far it is.

    Raises:
        ConfigError: a bad pool, routing policy, price or outage.
    """
    check_unique(list(pools))
    context = policy_context(pools, trace, slos, specs=[routing])
    policy_from_name(routing, context)  # a bad spec fails before anything runs
    if progress is not None:
        progress("pool costs per SLO-met request", 0.0, 1.0)
    costs = pool_costs(pools, trace, slos, prices, seed)
    if progress is not None:
        progress("pool costs per SLO-met request", 1.0, 1.0)
    order = [c.pool for c in costs]
    groups = [[p] for p in order] if routing.split(":")[0] == "length-pools" else [order]
    day = day_s if day_s is not None else max(trace.duration_s, 1.0)
    results = []
    for spec in [None, *scaling]:
        name = STATIC if spec is None else spec.text
        controller = None if spec is None else Autoscaler(spec, settings, groups, day)
        fleet = simulate_fleet(
            pools,
            trace,
            policy_from_name(routing, context),
            slos=slos,
            controller=controller,
            outages=outages,
            health=health,
            progress=_told(progress, name, trace.duration_s),
        )
        events = tuple(controller.events) if controller is not None else ()
        results.append(_result(name, fleet, events, _max_replicas(pools, events)))
    return AutoscalePlan(routing, day, tuple(costs), tuple(results))


def _result(
    name: str, fleet: FleetResult, events: tuple[ScaleEvent, ...], max_replicas: int
) -> ScalingResult:
    s, f = fleet.summary, fleet.figures
    return ScalingResult(
        scaling=name,
        slo_violations=f.slo_violations,
        shed=f.shed,
        failed=f.failed,
        breaker_ejections=f.breaker_ejections,
        gpu_hours=f.gpu_hours,
        max_replicas=max_replicas,
        goodput=s.goodput,
        slos_met=s.all_slos_met,
        ttft_ms=s.ttft_ms,
        events=events,
    )


def _told(
    progress: ReplayProgress | None, what: str, total_s: float
) -> Callable[[float], None] | None:
    if progress is None:
        return None
    return lambda done_s: progress(what, done_s, total_s)


def _max_replicas(pools: Sequence[PoolSpec], events: Sequence[ScaleEvent]) -> int:
    n = best = sum(p.replicas for p in pools)
    for e in events:
        n += e.change
        best = max(best, n)
    return best
