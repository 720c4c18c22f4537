"""``slotune fleet simulate``: replay a trace through a fleet of simulated replicas per policy.

Each policy gets a fresh fleet and the same trace; the results carry the summary fields of
``slotune sim`` (``ttft_ms``, ``itl_ms``, ``tpot_ms``, ``e2e_ms``, ``goodput``,
``prefix_hit_rate`` …) for the whole fleet, the requests shed, the GPU-hours, and a line
per replica.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.collector.records import RequestRecord
from slotune.collector.run_figures import FleetFigures
from slotune.collector.slo import SLI, SLO
from slotune.collector.summary import Summary, summarize
from slotune.collector.workload import Trace
from slotune.tuner.fleet.fleet import SHED_ERROR, Fleet
from slotune.tuner.fleet.health import FleetHealth, HealthSettings, Outage
from slotune.tuner.fleet.length_pools import LengthPools, length_threshold
from slotune.tuner.fleet.policy import RoutingPolicy
from slotune.tuner.fleet.pools import PoolSpec, check_unique
from slotune.tuner.fleet.registry import POLICY_NAMES, PolicyContext, policy_from_name
from slotune.tuner.fleet.replica import Replica
from slotune.tuner.sim import SimRequest, trace_requests

LONG_POOL = "long"
# The length-pools threshold is fitted on this many of the trace's first requests, among
# these percentiles of its lengths (and the token split).
FIT_REQUESTS = 2000
FIT_PERCENTILES = (50, 75, 90, 95, 98, 99)
_PROGRESS_EVERY = 512  # arrivals between two progress reports


class ReplayProgress(Protocol):
    """Told how far a replay is: ``what`` runs, ``done_s`` of ``total_s`` simulated seconds."""

    def __call__(self, what: str, done_s: float, total_s: float) -> None: ...


class Controller(Protocol):
    """Changes the fleet every ``tick_s`` while the trace runs (the autoscaler)."""

    tick_s: float

    def on_tick(self, now_s: float, fleet: Fleet) -> None: ...


@dataclass(frozen=True, slots=True)
class ReplicaResult:
    """What one replica did.

    Attributes:
        name, pool: the replica and its pool.
        num_requests: requests routed to it.
        busy_fraction: share of its up time spent in engine steps.
        queue_ms_mean, queue_ms_p99: arrival -> first scheduled step.
        prefix_hit_rate: prefix-cache hits over lookups, in blocks.
        preemptions: requests preempted (recomputed).
        gpu_hours: GPUs x up time.
    """

    name: str
    pool: str
    num_requests: int
    busy_fraction: float
    queue_ms_mean: float | None
    queue_ms_p99: float | None
    prefix_hit_rate: float
    preemptions: int
    gpu_hours: float

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}


@dataclass(frozen=True, slots=True)
class FleetResult:
    """One policy's run.

    Attributes:
        policy: the policy's name.
        summary: the fleet's summary (shed requests count as errors of kind ``shed``), with
            its ``fleet`` figures (shed, SLO violations, GPU hours, ...).
        replicas: per replica, in start order.
        records: one per request, in trace order.
    """

    policy: str
    summary: Summary
    replicas: tuple[ReplicaResult, ...]
    records: list[RequestRecord]

    @property
    def figures(self) -> FleetFigures:
        """The fleet's own figures, which every fleet run's summary carries."""
        if self.summary.fleet is None:
            raise ValueError(f"policy {self.policy}: a fleet result without fleet figures")
        return self.summary.fleet

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            **self.summary.to_dict(),
            "replicas": [r.to_dict() for r in self.replicas],
        }


def policy_context(
    pools: Sequence[PoolSpec],
    trace: Trace,
    slos: Sequence[SLO],
    *,
    specs: Sequence[str] = ("all",),
) -> PolicyContext:
    """Defaults the policies take from the fleet: the long pool, the length threshold, the
    TTFT budget.

    The long pool is the one named ``long``, else the last of two or more. When ``specs``
    (the policies to run) include ``length-pools`` without ``threshold=``, the threshold is
    fitted to the trace (:func:`fit_length_threshold`); otherwise it is the token split, which
    gives the long pools the share of the trace's tokens that their share of the fleet's GPUs
    x memory bandwidth can carry (a pool starting empty counts as one replica).
    """
    long: frozenset[str] = frozenset()
    names = [p.name for p in pools]
    if LONG_POOL in names:
        long = frozenset({LONG_POOL})
    elif len(pools) >= 2:
        long = frozenset({names[-1]})
    threshold = None
    if long and len(long) < len(pools) and len(trace):
        split = _token_split(pools, trace, long)
        threshold = (
            fit_length_threshold(pools, trace, slos, long, split)
            if any(_wants_fitted_threshold(s) for s in specs)
            else split
        )
    ttft = [s.threshold for s in slos if s.sli is SLI.TTFT]
    return PolicyContext(long, threshold, min(ttft) if ttft else None, frozenset(names))


def _token_split(pools: Sequence[PoolSpec], trace: Trace, long: frozenset[str]) -> float:
    weight = {
        p.name: max(p.replicas, 1) * p.gpus_per_replica * p.resolved().gpu.mem_bw_bytes_s
        for p in pools
    }
    share = sum(weight[n] for n in long) / sum(weight.values())
    return length_threshold([r.input_tokens + r.output_tokens for r in trace.requests], share)


def _wants_fitted_threshold(spec: str) -> bool:
    spec = spec.strip()
    if spec == "all":
        return True
    return any("length-pools" in s.split(":") and "threshold=" not in s for s in spec.split(","))


def fit_length_threshold(
    pools: Sequence[PoolSpec],
    trace: Trace,
    slos: Sequence[SLO],
    long_pools: frozenset[str],
    token_split: float,
) -> float:
    """The length-pools threshold with the lowest simulated TTFT p99 on the trace's start.

    The fleet is what decides a good split, not the token counts alone: a long prompt's GPU
    time grows faster than its tokens, and one pool may hold far fewer replicas than its
    share of memory bandwidth suggests. So each candidate — the token split and the 50th to
    99th percentiles of input + output tokens — routes the first :data:`FIT_REQUESTS`
    requests (at their own arrival times) on the fleet, and the one with the lowest TTFT p99
    wins (ties: more goodput). TTFT is what the split exists for: it keeps long prefills
    from holding up short requests.
    """
    totals = np.asarray([r.input_tokens + r.output_tokens for r in trace.requests], dtype=float)
    quantiles = np.percentile(totals, FIT_PERCENTILES)
    candidates = sorted({float(token_split), *(float(q) for q in quantiles if q > 0)})
    sample = Trace(trace.name, trace.requests[:FIT_REQUESTS])

    def score(threshold: float) -> tuple[float, float]:
        s = simulate_fleet(pools, sample, LengthPools(threshold, long_pools), slos=slos).summary
        p99 = s.ttft_ms.percentiles[99.0]
        return (math.inf if p99 is None else p99, -s.goodput)

    return min(candidates, key=score)


def policy_names(spec: str, context: PolicyContext) -> list[str]:
    """``all`` -> every policy the fleet can run; else the comma-separated specs."""
    if spec.strip() != "all":
        return [s.strip() for s in spec.split(",") if s.strip()]
    out = []
    for name in POLICY_NAMES:
        if name == "length-pools" and context.length_threshold_tokens is None:
            continue  # one pool: nothing to split
        if name == "slo-aware" and context.ttft_budget_s is None:
            continue  # no TTFT SLO: no budget to admit against
        out.append(name)
    return out


def simulate_fleet(
    pools: Sequence[PoolSpec],
    trace: Trace,
    policy: RoutingPolicy,
    *,
    slos: Sequence[SLO] = (),
    known_output: bool = False,
    controller: Controller | None = None,
    outages: Sequence[Outage] = (),
    health: HealthSettings | None = None,
    progress: Callable[[float], None] | None = None,
) -> FleetResult:
    """Serve every request of ``trace`` on a fleet routed by ``policy``.

    Args:
        pools: the pools (at least one; each validated like its engine).
        trace: arrivals and lengths.
        policy: a fresh policy object (it learns while it routes).
        slos: SLOs for goodput and attainment.
        known_output: the router knows output lengths (else it estimates them).
        controller: called every ``tick_s`` to add or drain replicas.
        outages: replicas failing while the trace runs.
        health: the proxy's breaker, poll and timeout settings facing them (default: those
            of a ``fleet.yaml`` without them).
        progress: told the simulated time reached, every few hundred arrivals.

    Raises:
        ConfigError: no pool, two pools with one name, a pool that does not start, or an
            outage naming no replica.
    """
    check_unique(list(pools))
    watch = FleetHealth(outages, health or HealthSettings()) if outages else None
    fleet = Fleet(pools, policy, known_output=known_output, health=watch)
    requests = trace_requests(trace)
    next_tick = 0.0
    for i, (request, source) in enumerate(zip(requests, trace.requests, strict=True)):
        if progress is not None and i % _PROGRESS_EVERY == 0:
            progress(request.arrival_s)
        if controller is not None:
            next_tick = _tick_until(fleet, controller, next_tick, request.arrival_s)
        fleet.advance(request.arrival_s)
        fleet.route(request, source, request.arrival_s)
    if controller is not None:
        # keep deciding until the last request is done (replicas that cannot schedule
        # their queue at all are left to end as timeouts)
        while any(r.is_busy for r in fleet.replicas):
            next_tick = _tick_until(fleet, controller, next_tick, next_tick)
    fleet.run_until_idle()
    if progress is not None:
        progress(trace.duration_s)
    end_s = max([trace.duration_s, *(r.clock_s for r in fleet.replicas)])
    fleet.retire_idle(end_s)
    for r in fleet.replicas:
        r.stopped_s = end_s
    records = fleet.records(requests)
    by_id = {q.request_id: q for q in requests}
    replicas = tuple(_replica_result(r, by_id) for r in fleet.retired + fleet.replicas)
    return FleetResult(policy.name, _summary(records, slos, fleet, replicas), replicas, records)


def _tick_until(fleet: Fleet, controller: Controller, next_tick: float, until_s: float) -> float:
    """Run the controller's ticks up to ``until_s``; returns the next tick's time."""
    while next_tick <= until_s:
        fleet.advance(next_tick)
        controller.on_tick(next_tick, fleet)
        next_tick += controller.tick_s
    return next_tick


def compare_policies(
    pools: Sequence[PoolSpec],
    trace: Trace,
    policy_spec: str,
    *,
    slos: Sequence[SLO] = (),
    known_output: bool = False,
    outages: Sequence[Outage] = (),
    health: HealthSettings | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[FleetResult]:
    """Run each policy of ``policy_spec`` (``all`` or ``a,b,…``), best goodput first.

    Raises:
        ConfigError: an unknown policy, a bad key, or a pool problem, before anything runs.
    """
    check_unique(list(pools))
    for p in pools:
        p.resolved()
    context = policy_context(pools, trace, slos, specs=[policy_spec])
    policies = [policy_from_name(name, context) for name in policy_names(policy_spec, context)]
    if not policies:
        raise ConfigError("--policy names no policy; give P[,P…] or all")
    results = []
    for policy in policies:
        if progress is not None:
            progress(policy.name)
        results.append(
            simulate_fleet(
                pools,
                trace,
                policy,
                slos=slos,
                known_output=known_output,
                outages=outages,
                health=health,
            )
        )
    return sorted(results, key=lambda r: -r.summary.goodput)


def _summary(
    records: list[RequestRecord],
    slos: Sequence[SLO],
    fleet: Fleet,
    replicas: tuple[ReplicaResult, ...],
) -> Summary:
    everyone = fleet.retired + fleet.replicas
    hits = sum(r.core.stats.prefix_hits for r in everyone)
    queries = sum(r.core.stats.prefix_queries for r in everyone)
    num_shed = Counter(r.error for r in records)[SHED_ERROR]
    per_request = [s for s in slos if s.sli is not SLI.ERROR_RATE]
    num_good = sum(1 for r in records if r.is_ok and all(s.is_good(r) for s in per_request))
    figures = FleetFigures(
        prefix_hit_rate=hits / queries if queries else 0.0,
        preemptions=sum(r.preemptions for r in replicas),
        shed=num_shed,
        shed_share=num_shed / len(records) if records else 0.0,
        # completed requests that missed a per-request SLO
        slo_violations=sum(1 for r in records if r.is_ok) - num_good,
        gpu_hours=sum(r.gpu_hours for r in replicas),
        # requests lost to failing replicas (cut, refused everywhere, timed out: 5xx)
        failed=sum(1 for r in records if r.error == "http_5xx"),
        breaker_ejections=0 if fleet.health is None else fleet.health.num_ejections,
        refused_attempts=0 if fleet.health is None else fleet.health.num_refused,
    )
    return summarize(records, slos, fleet=figures)


def _replica_result(replica: Replica, requests: Mapping[str, SimRequest]) -> ReplicaResult:
    stats = replica.core.stats
    up_s = max((replica.stopped_s or replica.clock_s) - replica.started_s, 0.0)
    queued = np.asarray(replica.queued_s(requests), dtype=float) * 1000
    return ReplicaResult(
        name=replica.name,
        pool=replica.pool,
        num_requests=replica.num_routed,
        busy_fraction=replica.busy_s / up_s if up_s else 0.0,
        queue_ms_mean=float(queued.mean()) if queued.size else None,
        queue_ms_p99=float(np.percentile(queued, 99)) if queued.size else None,
        prefix_hit_rate=stats.prefix_hits / stats.prefix_queries if stats.prefix_queries else 0.0,
        preemptions=stats.preemptions,
        gpu_hours=replica.gpus * up_s / 3600,
    )
