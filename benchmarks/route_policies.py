"""Routing policies: the simulated table on every bundled trace, or real vs simulated ranking.

``--table`` (simulated only, no processes): every bundled trace (``azure-code``, ``azure-conv``,
``mooncake-conversation``, ``mooncake-synthetic``, and ``azure-code`` + ``azure-conv``
interleaved) on two pools of four ``llama-3.1-8b`` replicas, H100 with a bf16 KV cache and H200
with an fp8 one, through ``--policies``; prints trace x pool x policy -> prefix hit rate, TTFT
mean / p90 / p99, shed share, and prefix-affinity against least-requests (TTFT mean and p90
within 2 %, hit rate higher where prefixes repeat). Then the azure mix on a short pool of
three and a long pool of one: length-pools (threshold fitted) against least-requests at TTFT
p99, beside what ``plan capacity`` says of the split. Gaps are scaled by ``--azure-time-scale``
and ``--mooncake-time-scale``.

    .venv/bin/python benchmarks/route_policies.py --table [--num-requests N]
        [--traces azure-code,...] [--pools h100,h200]

For each policy: ``--replicas`` fresh ``slotune emulate`` engines (llama-3.1-8b on h100-sxm,
vLLM defaults, ``--speedup S``: the emulated GPU runs S times faster than real time, so a
trace plays in 1/S of its time), ``slotune route`` with that policy in front, and
``slotune bench`` replaying the first ``--num-requests`` of a bundled trace at its own
timestamps compressed by S (``--trace-timing --time-scale 1/S``), with the TTFT SLO also
divided by S. Latencies and goodput are scaled back by S, so they read in the emulated GPU's
time, as the simulator's do. Then ``slotune fleet simulate`` runs the same pool, trace,
requests, SLO and policies (``--known-output``: bench sends max_tokens = the trace's output
length). With ``--repeats N`` each policy runs N times for real, interleaved, and the table
shows means. Prints both tables and both rankings (by goodput under the SLO, the simulator's
order). Asserts nothing.

Without ``--table``:

    .venv/bin/python benchmarks/route_policies.py [--workload mooncake-conversation]
        [--num-requests 300] [--speedup 4] [--policies round-robin,least-requests,...]
        [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess

from _route import MODEL, SLOTUNE, bench, emulated_engines, route_proxy
from _route_table import table

GPU = "h100-sxm"


def measured(args: argparse.Namespace, policy: str) -> dict[str, float]:
    """One policy through the proxy: goodput (req/s) and TTFT p50/p99 (ms), emulated time."""
    s = args.speedup
    with (
        emulated_engines(args.replicas, flags=["--speedup", str(s)]) as urls,
        route_proxy(urls, policy, extra=f"block_size: {args.block_size}\n") as proxy,
    ):
        summary = bench(
            proxy.url,
            [
                "--workload",
                args.workload,
                "--num-requests",
                str(args.num_requests),
                "--trace-timing",
                "--time-scale",
                str(1 / s),
                "--slo",
                f"ttft:p99<={args.ttft_slo_s * 1000 / s:g}ms",
            ],
        )
    if summary["num_errors"]:
        print(f"{policy}: errors {summary['errors_by_kind']}")
    return {
        "goodput": summary["goodput"] / s,
        "ttft_p50": summary["ttft_ms"]["p50"] * s,
        "ttft_p99": summary["ttft_ms"]["p99"] * s,
        "errors": summary["num_errors"],
    }


def simulated(args: argparse.Namespace, policies: list[str]) -> dict[str, dict[str, float]]:
    out = subprocess.run(
        [
            SLOTUNE,
            "fleet",
            "simulate",
            "--pool",
            f"a:{args.replicas}:{MODEL}:{GPU}",
            "--workload",
            args.workload,
            "--num-requests",
            str(args.num_requests),
            "--policy",
            ",".join(policies),
            "--slo",
            f"ttft:p99<={args.ttft_slo_s:g}s",
            "--known-output",
            "--no-store",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        e["policy"]: {
            "goodput": e["goodput"],
            "ttft_p50": e["ttft_ms"]["p50"],
            "ttft_p99": e["ttft_ms"]["p99"],
            "errors": e["num_errors"],
        }
        for e in json.loads(out)
    }


def _table(title: str, rows: dict[str, dict[str, float]]) -> list[str]:
    ranked = sorted(rows, key=lambda p: -rows[p]["goodput"])
    print(f"\n{title}")
    print(f"{'policy':<18}{'goodput req/s':>14}{'TTFT p50 ms':>13}{'TTFT p99 ms':>13}{'errors':>8}")
    for p in ranked:
        r = rows[p]
        print(
            f"{p:<18}{r['goodput']:>14.3f}{r['ttft_p50']:>13.0f}{r['ttft_p99']:>13.0f}"
            f"{int(r['errors']):>8}"
        )
    return ranked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", default="mooncake-conversation")
    ap.add_argument(
        "--num-requests", type=int, default=None, help="first N requests (300; --table: all)"
    )
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--speedup", type=float, default=4.0)
    ap.add_argument("--ttft-slo-s", type=float, default=2.0)
    ap.add_argument("--block-size", type=int, default=512, help="the trace's block size")
    ap.add_argument("--policies", default="round-robin,least-requests,prefix-affinity,score")
    ap.add_argument("--repeats", type=int, default=1, help="real runs per policy (mean shown)")
    ap.add_argument("--table", action="store_true", help="the simulated table, no processes")
    ap.add_argument("--traces", help="--table: comma-separated (default: every bundled trace)")
    ap.add_argument("--pools", default="h100,h200", help="--table: h100, h200 or both")
    ap.add_argument("--azure-time-scale", type=float, default=0.25)
    ap.add_argument("--mooncake-time-scale", type=float, default=2.0)
    args = ap.parse_args()
    if args.table:
        table(args)
        return
    args.num_requests = args.num_requests or 300
    policies = args.policies.split(",")
    print(
        f"{args.workload}, first {args.num_requests} requests at the trace's timestamps; "
        f"{args.replicas} x {MODEL} on {GPU}; SLO ttft:p99<={args.ttft_slo_s:g}s; "
        f"emulated engines at speedup {args.speedup:g}; {os.cpu_count()} CPU cores, load "
        f"average {os.getloadavg()[0]:.1f}"
    )
    # repeats interleaved (every policy once, then again), so drift in the machine's load
    # spreads over all policies; the table shows the mean, the spread is printed per run
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in policies}
    for _ in range(args.repeats):
        for p in policies:
            runs[p].append(measured(args, p))
            print(f"  {p}: goodput {runs[p][-1]['goodput']:.3f} req/s", flush=True)
    real = {p: {k: statistics.mean(r[k] for r in rs) for k in rs[0]} for p, rs in runs.items()}
    print(f"load average after the real runs: {os.getloadavg()[0]:.1f}")
    real_rank = _table("slotune route + emulated engines (emulated-GPU time)", real)
    sim_rank = _table("slotune fleet simulate", simulated(args, policies))
    print(f"\nranking, real:      {' > '.join(real_rank)}")
    print(f"ranking, simulated: {' > '.join(sim_rank)}")
    print(f"same order: {'yes' if real_rank == sim_rank else 'no'}")


if __name__ == "__main__":
    main()
