"""The simulated routing table of ``route_policies.py --table``: trace x pool x policy."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from fleet_routing import MIX_POOLS, MIX_SLOS, _interleaved

from slotune.collector.slo import parse_slos
from slotune.collector.workload import Trace, named_workload, retime
from slotune.tuner.fleet.capacity import plan_capacity
from slotune.tuner.fleet.pools import parse_pool
from slotune.tuner.fleet.prices import gpu_prices
from slotune.tuner.fleet.registry import policy_from_name
from slotune.tuner.fleet.simulator import FleetResult, policy_context, simulate_fleet

POOLS = {
    "h100": "h100:4:llama-3.1-8b:h100-sxm",
    "h200": "h200:4:llama-3.1-8b:h200:--kv-cache-dtype fp8",
}
TRACES = ("azure-code", "azure-conv", "azure-mix", "mooncake-conversation", "mooncake-synthetic")
# within this of least-requests counts as "at least as good" on TTFT mean and p90
TOLERANCE = 0.02


def _trace(name: str, args: argparse.Namespace) -> Trace:
    if name == "azure-mix":
        return _interleaved(args.azure_time_scale, args.num_requests)
    scale = args.mooncake_time_scale if name.startswith("mooncake") else args.azure_time_scale
    return retime(named_workload(name), time_scale=scale, num_requests=args.num_requests)


def _run(pools: Sequence[str], trace: Trace, policy: str, slos: Sequence[str]) -> FleetResult:
    specs = [parse_pool(p) for p in pools]
    parsed = parse_slos(list(slos))
    context = policy_context(specs, trace, parsed, specs=[policy])
    return simulate_fleet(specs, trace, policy_from_name(policy, context), slos=parsed)


def _row(trace: str, pool: str, r: FleetResult) -> str:
    s = r.summary
    return (
        f"{trace:22} {pool:5} {r.policy:18} {r.figures.prefix_hit_rate:7.1%} "
        f"{s.ttft_ms.mean or 0:9.0f} {s.ttft_ms.percentiles[90.0] or 0:9.0f} "
        f"{s.ttft_ms.percentiles[99.0] or 0:9.0f} {r.figures.shed_share:6.1%}"
    )


def _verdict(results: dict[str, FleetResult]) -> str:
    """prefix-affinity against least-requests: TTFT mean and p90 within 2 %, a higher hit rate
    where prefixes repeat."""
    a, b = results["prefix-affinity"], results["least-requests"]
    parts = []
    ok = True
    for label, x, y in (
        ("mean", a.summary.ttft_ms.mean or 0.0, b.summary.ttft_ms.mean or 0.0),
        (
            "p90",
            a.summary.ttft_ms.percentiles[90.0] or 0.0,
            b.summary.ttft_ms.percentiles[90.0] or 0.0,
        ),
    ):
        ratio = x / y if y else 1.0
        ok &= ratio <= 1 + TOLERANCE
        parts.append(f"TTFT {label} {ratio - 1:+.1%}")
    hit_a, hit_b = a.figures.prefix_hit_rate, b.figures.prefix_hit_rate
    # where prefixes repeat (either finds a hit), prefix-affinity must find more
    ok &= hit_a > hit_b or max(hit_a, hit_b) == 0
    parts.append(f"hit {hit_a:.1%} vs {hit_b:.1%}")
    return f"  prefix-affinity vs least-requests: {', '.join(parts)} -> {'ok' if ok else 'MISS'}"


def table(args: argparse.Namespace) -> None:
    policies = args.policies.split(",")
    traces = args.traces.split(",") if args.traces else TRACES
    pools = args.pools.split(",")
    slos = ("ttft:p99<=2s",)
    print(
        f"gaps x{args.azure_time_scale:g} (azure) / x{args.mooncake_time_scale:g} (mooncake); "
        f"{'first ' + str(args.num_requests) if args.num_requests else 'all'} requests; pools "
        + "; ".join(POOLS[p] for p in pools)
    )
    print(
        f"{'trace':22} {'pool':5} {'policy':18} {'hit':>7} {'TTFT mean':>9} {'TTFT p90':>9} "
        f"{'TTFT p99':>9} {'shed':>6}"
    )
    for name in traces:
        trace = _trace(name, args)
        for pool in pools:
            results = {}
            for policy in policies:
                start = time.process_time()
                results[policy] = r = _run([POOLS[pool]], trace, policy, slos)
                print(
                    f"{_row(name, pool, r)}  ({time.process_time() - start:.0f} CPU-s)", flush=True
                )
            if {"prefix-affinity", "least-requests"} <= results.keys():
                print(_verdict(results), flush=True)
    if args.traces is None or "azure-mix" in traces:
        _mix(args)


def _mix(args: argparse.Namespace) -> None:
    """length-pools (fitted threshold) vs least-requests on a short pool of 3 + a long one."""
    trace = _trace("azure-mix", args)
    print(f"\nazure-mix on {' + '.join(MIX_POOLS)}, SLOs {', '.join(MIX_SLOS)}")
    results = {p: _run(MIX_POOLS, trace, p, MIX_SLOS) for p in ("least-requests", "length-pools")}
    for r in results.values():
        print(_row("azure-mix", "split", r))
    lp = results["length-pools"].summary.ttft_ms.percentiles[99.0] or 0.0
    lr = results["least-requests"].summary.ttft_ms.percentiles[99.0] or 0.0
    print(f"  length-pools TTFT p99 {lp:,.0f} ms vs least-requests {lr:,.0f} ms ({lp / lr:.2f}x)")
    plan = plan_capacity(
        [parse_pool(p) for p in MIX_POOLS], trace, parse_slos(list(MIX_SLOS)), gpu_prices()
    )
    split = plan.split
    print(
        f"  plan capacity: one pool {plan.one_pool.gpus} GPUs ${plan.one_pool.cost_per_hour:.2f}/h"
        + (
            f", split at {split.threshold_tokens:,.0f} tokens {split.gpus} GPUs "
            f"${split.cost_per_hour:.2f}/h"
            if split is not None
            else ", no split meets the SLOs"
        )
        + f" -> {plan.chosen}"
    )
