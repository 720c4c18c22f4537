"""Load-shedding thresholds: which ``slo-aware`` margin protects the SLOs without cutting
normal bursts.

``slo-aware`` admits a request while its predicted queueing delay is at most ``margin x``
the TTFT budget (see :mod:`~slotune.tuner.fleet.slo_aware`). On the trace, with a burst of
``burst_s`` injected where the trace is busiest (the window of ``burst_s`` holding the most
arrivals):

1. the *absorbable* burst is the largest factor (1 = the trace as it is) whose run, with no
   shedding at all, still meets every SLO: the fleet can serve it, so every request shed
   there is shed wrongly (none: the fleet misses the SLOs even without a burst);
2. the *overload* is the smallest larger factor that breaks a TTFT SLO without shedding
   (admission acts on TTFT; a burst that only breaks TPOT is no test of it);
3. each margin is replayed on both: the share of the absorbable burst's requests it sheds
   (target below 1 %), and whether the requests it admits under overload meet the TTFT
   SLOs (what admission controls; a TPOT or ITL SLO depends on the batch size, which
   ``max_num_seqs`` bounds, not on admission — their attainment is reported alongside).

The recommended margin is the largest that keeps admitted requests within the TTFT SLOs
under overload (it sheds least) among those wrongly shedding under 1 % of the normal burst.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slotune.collector.errors import ConfigError
from slotune.collector.plans import MarginResult
from slotune.collector.plans import SheddingPlan as SheddingPlan
from slotune.collector.records import RequestRecord
from slotune.collector.slo import SLI, SLO
from slotune.collector.summary import summarize
from slotune.collector.workload import Trace
from slotune.tuner.fleet.capacity import busiest_window
from slotune.tuner.fleet.fleet import SHED_ERROR
from slotune.tuner.fleet.pools import PoolSpec
from slotune.tuner.fleet.registry import PolicyContext, policy_from_name
from slotune.tuner.fleet.replay_trace import FlashCrowd, inject_flash_crowd
from slotune.tuner.fleet.simulator import (
    FleetResult,
    ReplayProgress,
    policy_context,
    simulate_fleet,
)
from slotune.tuner.fleet.slo_aware import SloAware

DEFAULT_MARGINS = (0.25, 0.5, 0.75, 1.0, 1.5)
BURST_FACTORS = (1.5, 2.0, 3.0, 4.0, 6.0)
MAX_BURST_FACTOR = 64.0
DEFAULT_BURST_S = 120.0
WRONG_SHED_TARGET = 0.01


def plan_shedding(
    pools: Sequence[PoolSpec],
    trace: Trace,
    slos: Sequence[SLO],
    *,
    routing: str = "least-requests",
    margins: Sequence[float] = DEFAULT_MARGINS,
    burst_s: float = DEFAULT_BURST_S,
    seed: int = 0,
    progress: ReplayProgress | None = None,
) -> SheddingPlan:
    """Find the admission margin for ``routing`` on ``trace`` (see the module doc).

    Raises:
        ConfigError: no TTFT SLO (the budget admission is measured against), or bad input.
    """
    context = policy_context(pools, trace, slos, specs=[routing])
    if context.ttft_budget_s is None:
        raise ConfigError("shedding thresholds need a TTFT SLO, e.g. --slo ttft:p99<=500ms")
    budget = context.ttft_budget_s
    # the burst lands where the trace is already busiest: the hardest moment to absorb it
    start, _ = busiest_window(trace, burst_s)

    def burst(factor: float) -> Trace:
        if factor <= 1.0:
            return trace
        return inject_flash_crowd(trace, FlashCrowd(start, burst_s, factor), seed)

    def run(t: Trace, margin: float | None, factor: float) -> FleetResult:
        policy = _policy(routing, context, budget, margin)
        what = (
            f"burst x{factor:g} " + policy.name + ("" if margin is None else f" margin {margin:g}")
        )
        told = None if progress is None else lambda done_s: progress(what, done_s, t.duration_s)
        return simulate_fleet(pools, t, policy, slos=slos, progress=told)

    absorbable: float | None = None
    overload: float | None = None
    # the listed factors, then doubling: a fleet with room to spare needs a bigger burst
    factors = [1.0, *BURST_FACTORS]
    while factors[-1] < MAX_BURST_FACTOR:
        factors.append(factors[-1] * 2)
    broken = False
    for factor in factors:
        attainment = run(burst(factor), None, factor).summary.slo_attainment
        if not broken and all(a.is_met for a in attainment):
            absorbable = factor
            continue
        broken = True
        # admission acts on TTFT: the overload to test is the first burst that breaks it
        if not all(a.is_met for a in attainment if a.slo.sli is SLI.TTFT):
            overload = factor
            break
    if overload is None:
        raise ConfigError(
            f"even a burst of {factors[-1]:g}x for {burst_s:g}s keeps TTFT within the SLO: no "
            "shedding is needed; check the --slo values or use a longer --burst"
        )
    results = []
    for margin in margins:
        normal = run(burst(absorbable), margin, absorbable) if absorbable is not None else None
        over = run(burst(overload), margin, overload)
        admitted = [r for r in over.records if r.error != SHED_ERROR]
        attainment = summarize(admitted, slos).slo_attainment
        results.append(
            MarginResult(
                margin=margin,
                burst_shed_share=None
                if normal is None
                else _window_shed_share(normal.records, start, burst_s),
                overload_shed_share=over.figures.shed_share,
                overload_ttft_met=all(a.is_met for a in attainment if a.slo.sli is SLI.TTFT),
                overload_attainment={a.slo.name: a.attainment for a in attainment},
                overload_goodput=over.summary.goodput,
            )
        )
    good = [
        m
        for m in results
        if m.overload_ttft_met
        and m.burst_shed_share is not None
        and m.burst_shed_share < WRONG_SHED_TARGET
    ]
    recommended = max(good, key=lambda m: m.margin).margin if good else None
    return SheddingPlan(
        routing,
        budget,
        burst_s,
        absorbable,
        overload,
        WRONG_SHED_TARGET,
        tuple(results),
        recommended,
    )


def _policy(routing: str, context: PolicyContext, budget_s: float, margin: float | None) -> Any:
    inner = policy_from_name(routing, context)
    return inner if margin is None else SloAware(inner, budget_s, margin)


def _window_shed_share(records: list[RequestRecord], start_s: float, duration_s: float) -> float:
    window = [r for r in records if start_s <= r.send_s < start_s + duration_s]
    if not window:
        return 0.0
    return sum(r.error == SHED_ERROR for r in window) / len(window)
