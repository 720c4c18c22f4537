"""``slotune plan capacity``: replicas per pool and GPUs for a trace's peak under the SLOs.

One replica's capacity is the tuner's capacity objective — the highest request rate at which
every SLO holds — measured on the simulator with the requests the pool would serve. A pool
then needs ``ceil(peak rate x share x (1 + headroom) / capacity)`` replicas (NVIDIA Dynamo's
SLA planner sizes the same way, from profiled per-GPU throughput). Two layouts are priced:
one pool serving everything, and a short pool plus a long pool split at a length threshold;
the split pays when it needs fewer GPU-dollars per hour.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.collector.plans import CapacityPlan as CapacityPlan
from slotune.collector.plans import LayoutPlan, PoolPlan
from slotune.collector.slo import SLO
from slotune.collector.workload import Trace, retime
from slotune.tuner.fleet.pools import PoolSpec
from slotune.tuner.fleet.prices import GpuPrices
from slotune.tuner.sim import simulate
from slotune.tuner.tune.objectives import ObjectiveKind, evaluate_objective

DEFAULT_HEADROOM = 0.2
DEFAULT_SAMPLE_REQUESTS = 1000
PEAK_WINDOW_S = 60.0
# length quantiles tried as the short/long threshold when none is given
SPLIT_QUANTILES = (0.75, 0.9)
# the capacity search starts this far below the rate one replica completes when saturated
_START_FRACTION = 0.7


def busiest_window(trace: Trace, window_s: float) -> tuple[float, int]:
    """Start and number of arrivals of the ``window_s`` window holding the most arrivals."""
    t = np.asarray([r.timestamp_s for r in trace.requests], dtype=float)
    if t.size == 0:
        raise ConfigError("the trace is empty: nothing to plan for")
    counts = np.searchsorted(t, t + window_s, side="left") - np.arange(t.size)
    i = int(counts.argmax())
    return float(t[i]), int(counts[i])


def mean_rate(trace: Trace) -> float:
    """Requests per second over the whole trace."""
    return len(trace) / max(trace.duration_s, 1.0)


def peak_rate(trace: Trace, window_s: float = PEAK_WINDOW_S) -> float:
    """Most arrivals in any ``window_s`` window, per second (the mean for shorter traces);
    never below :func:`mean_rate`, which a window's edges can otherwise undercut on a trace
    barely longer than a window."""
    span = trace.duration_s - (trace.requests[0].timestamp_s if len(trace) else 0.0)
    if span <= window_s:
        return max(len(trace) / max(span, 1.0), mean_rate(trace))
    return max(busiest_window(trace, window_s)[1] / window_s, mean_rate(trace))


def replica_capacity(
    pool: PoolSpec, trace: Trace, slos: Sequence[SLO], *, sample_requests: int, seed: int
) -> float:
    """One replica's highest rate (req/s) with every SLO held, on ``trace``'s lengths."""
    pool.resolved()
    config = pool.config

    def measure(rate: float | None) -> Any:
        sample = retime(trace, rate=rate, num_requests=sample_requests, seed=seed)
        return simulate(config, sample, slos=slos, seed=seed).summary

    saturated = measure(1e6).request_throughput
    if saturated <= 0:
        return 0.0
    result = evaluate_objective(
        ObjectiveKind.CAPACITY, measure, slos, rate=None, start_rate=saturated * _START_FRACTION
    )
    return float(result.values[0])


def plan_capacity(
    pools: Sequence[PoolSpec],
    trace: Trace,
    slos: Sequence[SLO],
    prices: GpuPrices,
    *,
    rate: float | None = None,
    headroom: float = DEFAULT_HEADROOM,
    split_threshold: float | None = None,
    sample_requests: int = DEFAULT_SAMPLE_REQUESTS,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> CapacityPlan:
    """Size the fleet for ``trace`` (or ``rate`` req/s of its lengths) under ``slos``.

    Args:
        pools: candidate configurations (their replica counts are ignored). One pool serves
            everything with the cheapest of them; the split puts the pool named ``short``
            (else the first) on short requests and ``long`` (else the last) on long ones.
        trace: arrivals and lengths.
        slos: the SLOs every replica must hold (at least one).
        prices: GPU prices per hour.
        rate: the peak rate to plan for (default: the trace's busiest minute).
        headroom: spare fraction on top of the peak (0.2 = 20 %).
        split_threshold: the short/long threshold in tokens (default: the cheapest of the
            trace's 75th and 90th length percentiles).
        sample_requests: requests per capacity measurement.
        seed: seed of the Poisson arrivals of the capacity search.
        progress: told what is being measured.

    Raises:
        ConfigError: no SLO or pool, a bad headroom, or a pool that meets the SLOs at no rate.
    """
    if not slos:
        raise ConfigError("plan capacity needs at least one --slo, e.g. ttft:p99<=500ms")
    if not pools:
        raise ConfigError("give at least one --pool NAME:REPLICAS:MODEL:GPU[:CONFIG]")
    if headroom < 0:
        raise ConfigError(f"--headroom {headroom}: use a fraction >= 0, e.g. 0.2")
    peak = rate if rate is not None else peak_rate(trace)
    totals = np.asarray([r.input_tokens + r.output_tokens for r in trace.requests], dtype=float)
    tokens_per_hour = len(trace) / max(trace.duration_s, 1.0) * float(totals.mean()) * 3600

    def pool_plan(pool: PoolSpec, requests: Trace, share: float) -> PoolPlan:
        if progress is not None:
            progress(f"capacity of one {pool.name} replica on {len(requests)} requests")
        cap = replica_capacity(pool, requests, slos, sample_requests=sample_requests, seed=seed)
        if cap <= 0:
            raise _Infeasible(pool.name)
        replicas = max(1, math.ceil(peak * share * (1 + headroom) / cap))
        gpus = replicas * pool.gpus_per_replica
        return PoolPlan(
            pool.name,
            pool.model,
            pool.gpu,
            share,
            peak * share,
            cap,
            replicas,
            gpus,
            gpus * prices.of(pool.gpu),
        )

    def layout(name: str, threshold: float | None, plans: list[PoolPlan]) -> LayoutPlan:
        cost = sum(p.cost_per_hour for p in plans)
        return LayoutPlan(name, threshold, tuple(plans), cost / tokens_per_hour * 1e6)

    singles = []
    for pool in pools:
        try:
            singles.append(layout("one-pool", None, [pool_plan(pool, trace, 1.0)]))
        except _Infeasible:
            continue
    if not singles:
        raise ConfigError(
            f"no --pool meets {', '.join(str(s) for s in slos)} at any rate on this workload; "
            "relax --slo, or use a larger GPU or tensor_parallel_size"
        )
    one_pool = min(singles, key=lambda p: p.cost_per_hour)
    short = next((p for p in pools if p.name == "short"), pools[0])
    long = next((p for p in pools if p.name == "long"), pools[-1])
    thresholds = (
        [split_threshold]
        if split_threshold is not None
        else sorted({float(np.quantile(totals, q)) for q in SPLIT_QUANTILES})
    )
    splits = []
    for t in thresholds:
        short_part = Trace(
            f"{trace.name} <= {t:.0f}",
            tuple(r for r in trace.requests if r.input_tokens + r.output_tokens <= t),
        )
        long_part = Trace(
            f"{trace.name} > {t:.0f}",
            tuple(r for r in trace.requests if r.input_tokens + r.output_tokens > t),
        )
        if not len(short_part) or not len(long_part):
            continue
        n = len(trace)
        try:
            plans = [
                pool_plan(short, short_part, len(short_part) / n),
                pool_plan(long, long_part, len(long_part) / n),
            ]
        except _Infeasible:
            continue
        plans[0] = _renamed(plans[0], "short")
        plans[1] = _renamed(plans[1], "long")
        splits.append(layout("split", t, plans))
    split = min(splits, key=lambda p: p.cost_per_hour) if splits else None
    # A --rate below the trace's own mean is the peak the user plans for: the mean cost is
    # computed at no more than it.
    return CapacityPlan(peak, min(mean_rate(trace), peak), headroom, one_pool, split, prices.as_of)


def _renamed(plan: PoolPlan, pool: str) -> PoolPlan:
    return replace(plan, pool=pool)


class _Infeasible(Exception):
    """A pool meets the SLOs at no rate on the requests it would serve."""

    def __init__(self, pool: str) -> None:
        super().__init__(pool)
        self.pool = pool
