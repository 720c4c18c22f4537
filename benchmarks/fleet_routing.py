"""Routing quality on the fleet simulator, on bundled traces: every policy's tail and goodput.

Two scenarios, every policy of ``slotune fleet simulate --policy all`` in each:

1. The bundled prefix-sharing traces, ``mooncake-conversation`` (multi-turn prompts) and
   ``mooncake-synthetic`` (512-token hash blocks), gaps scaled by ``--mooncake-time-scale``,
   on four ``llama-3.1-8b`` replicas on ``h200`` with an fp8 KV cache (``--mooncake-pool``):
   do prefix-affinity / score beat round-robin on hit rate and TTFT mean, p90 and p99 by
   keeping a shared prefix on one replica's cache? (A conversation's next turn comes a
   median 421 requests later, ~15k prompt tokens each, so about 100 requests later at its
   own replica: an H100's bf16 KV cache holds about 30 such requests and has evicted the
   prefix whatever the routing; the H200's fp8 cache holds about four times as many.)
2. ``azure-code`` + ``azure-conv`` interleaved by arrival time (long code prompts among short
   chat turns), gaps scaled by ``--azure-time-scale``, on a short pool of three and a long
   pool of one: does length-pools (its threshold fitted to the trace) beat least-requests?

Prints, per scenario and policy: TTFT p50/p90/p99, TPOT p99, goodput under the SLOs, prefix-cache
hit rate, shed share; for the mix, TTFT p99 of short and long requests apart; then the
headline ratios. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/fleet_routing.py [--num-requests N] [--mooncake-time-scale 2]
        [--mooncake-pool POOL] [--azure-time-scale 0.25] [--only mooncake|azure-mix]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from slotune.collector.slo import parse_slos
from slotune.collector.workload import Trace, named_workload, retime
from slotune.tuner.fleet.pools import parse_pool
from slotune.tuner.fleet.simulator import FleetResult, compare_policies, policy_context

PREFIX_WORKLOADS = ("mooncake-conversation", "mooncake-synthetic")
MOONCAKE_POOLS = ("a:4:llama-3.1-8b:h200:--kv-cache-dtype fp8",)
MOONCAKE_SLOS = ("ttft:p99<=2s", "tpot:p99<=100ms")
MIX_POOLS = ("short:3:llama-3.1-8b:h100-sxm", "long:1:llama-3.1-8b:h100-sxm")
MIX_SLOS = ("ttft:p99<=1s", "tpot:p99<=60ms")


def _interleaved(time_scale: float, num_requests: int | None) -> Trace:
    code, conv = named_workload("azure-code"), named_workload("azure-conv")
    merged = sorted((*code.requests, *conv.requests), key=lambda r: r.timestamp_s)
    trace = Trace("azure-code+azure-conv", tuple(merged))
    return retime(trace, time_scale=time_scale, num_requests=num_requests)


def _scenario(
    title: str, pools: Sequence[str], trace: Trace, slos: Sequence[str]
) -> dict[str, FleetResult]:
    print(
        f"\n{title}: {len(trace):,} requests over {trace.duration_s:,.0f} s; pools "
        f"{', '.join(pools)}; SLOs {', '.join(slos)}"
    )
    results = compare_policies(
        [parse_pool(p) for p in pools], trace, "all", slos=parse_slos(list(slos))
    )
    print(
        f"{'policy':26} {'TTFT mean':>9} {'TTFT p50':>9} {'TTFT p90':>9} {'TTFT p99':>9} "
        f"{'TPOT p99':>9} {'goodput':>8} "
        f"{'prefix hit':>10} {'shed':>6}"
    )
    for r in results:
        s = r.summary
        print(
            f"{r.policy:26} {s.ttft_ms.mean or 0:9.0f} {s.ttft_ms.percentiles[50.0] or 0:9.0f} "
            f"{s.ttft_ms.percentiles[90.0] or 0:9.0f} "
            f"{s.ttft_ms.percentiles[99.0] or 0:9.0f} {s.tpot_ms.percentiles[99.0] or 0:9.1f} "
            f"{s.goodput:8.2f} {r.figures.prefix_hit_rate:10.1%} {r.figures.shed_share:6.1%}"
        )
    return {r.policy: r for r in results}


def _by_length(results: dict[str, FleetResult], trace: Trace, pools: Sequence[str]) -> None:
    """TTFT p99 of the short and of the long requests apart (length-pools' own threshold)."""
    specs = [parse_pool(p) for p in pools]
    # the threshold length-pools ran with: fitted to the trace as compare_policies fits it
    context = policy_context(specs, trace, parse_slos(list(MIX_SLOS)), specs=["length-pools"])
    threshold = context.length_threshold_tokens or 0.0
    is_long = [r.input_tokens + r.output_tokens > threshold for r in trace.requests]
    print(
        f"  TTFT p99 (ms) by length, fitted threshold {threshold:,.0f} tokens "
        f"({sum(is_long) / len(is_long):.1%} of requests long):"
    )
    for policy, result in results.items():
        split = {
            label: [
                rec.ttft_s * 1000
                for rec, long in zip(result.records, is_long, strict=True)
                if long is want and rec.ttft_s is not None
            ]
            for label, want in (("short", False), ("long", True))
        }
        cells = ", ".join(f"{label} {np.percentile(v, 99):,.0f}" for label, v in split.items() if v)
        print(f"    {policy:26} {cells}")


def _ratio(results: dict[str, FleetResult], a: str, b: str) -> str:
    pa = results[a].summary.ttft_ms.percentiles[99.0] or 0.0
    pb = results[b].summary.ttft_ms.percentiles[99.0] or 0.0
    return f"{a} TTFT p99 {pa:,.0f} ms vs {b} {pb:,.0f} ms ({pa / pb:.2f}x)" if pb else "n/a"


def _versus_round_robin(results: dict[str, FleetResult], policy: str) -> str:
    """A prefix-aware policy against round-robin: hit rate and TTFT mean / p90 / p99."""
    a, b = results[policy].summary, results["round-robin"].summary
    hit_a = results[policy].figures.prefix_hit_rate
    hit_b = results["round-robin"].figures.prefix_hit_rate
    parts = [f"hit {hit_a:.1%} vs {hit_b:.1%} ({'win' if hit_a > hit_b else 'LOSS'})"]
    for label, x, y in (
        ("mean", a.ttft_ms.mean or 0.0, b.ttft_ms.mean or 0.0),
        ("p90", a.ttft_ms.percentiles[90.0] or 0.0, b.ttft_ms.percentiles[90.0] or 0.0),
        ("p99", a.ttft_ms.percentiles[99.0] or 0.0, b.ttft_ms.percentiles[99.0] or 0.0),
    ):
        parts.append(f"TTFT {label} {x:,.0f} vs {y:,.0f} ms ({'win' if x < y else 'LOSS'})")
    return f"{policy} vs round-robin: " + "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-requests", type=int, default=None)
    parser.add_argument("--mooncake-time-scale", type=float, default=2.0)
    parser.add_argument(
        "--mooncake-pool",
        default=MOONCAKE_POOLS[0],
        help="the prefix-sharing traces' pool, e.g. a:4:llama-3.1-8b:h100-sxm",
    )
    parser.add_argument("--azure-time-scale", type=float, default=0.25)
    parser.add_argument("--only", choices=("mooncake", "azure-mix"), help="one scenario")
    args = parser.parse_args()
    if args.only == "azure-mix":
        _azure_mix(args.azure_time_scale, args.num_requests)
        return
    for workload in PREFIX_WORKLOADS:
        trace = retime(
            named_workload(workload),
            time_scale=args.mooncake_time_scale,
            num_requests=args.num_requests,
        )
        results = _scenario(
            f"{workload} (gaps x{args.mooncake_time_scale:g}), 4 replicas",
            (args.mooncake_pool,),
            trace,
            MOONCAKE_SLOS,
        )
        print("\nheadline")
        for policy in ("prefix-affinity", "score"):
            print("  " + _versus_round_robin(results, policy))
        _goodput(workload, results)
    if args.only is None:
        _azure_mix(args.azure_time_scale, args.num_requests)


def _azure_mix(time_scale: float, num_requests: int | None) -> None:
    mix = _interleaved(time_scale, num_requests)
    results = _scenario(f"azure-code + azure-conv (gaps x{time_scale:g})", MIX_POOLS, mix, MIX_SLOS)
    _by_length(results, mix, MIX_POOLS)
    print("  " + _ratio(results, "length-pools", "least-requests"))
    _goodput("azure mix", results)


def _goodput(label: str, results: dict[str, FleetResult]) -> None:
    ranked = ", ".join(f"{p} {r.summary.goodput:.2f}" for p, r in results.items())
    print(f"  goodput ({label}), best first: {ranked}")


if __name__ == "__main__":
    main()
