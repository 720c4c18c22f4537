"""Requests per second through ``slotune route`` vs straight to the same engines, with errors.

Two emulated engines (llama-3.1-8b on h100-sxm at ``--speedup``, so that they alone hold the
rates asked of them) serve both paths. At each of ``--rates``, ``slotune bench`` sends Poisson
load of streamed completions: **direct**, one bench process per engine at half the rate each,
at the same time; **proxy**, one bench process at the whole rate through the proxy
(``least-requests``, default timeouts: connect 2 s). Prints, side by side, the offered rate, the
completed requests per second, the errors (by kind), TTFT p50 / p99, how many scheduler steps
of the engines ran late during the run (:mod:`tuner.emulate.lag`: when they did, the
engines did not hold the rate on this host and the latencies say more about the host than
about the proxy), and the proxy's upstream errors and ejections over all its runs. Asserts
nothing.

    .venv/bin/python benchmarks/route_throughput.py [--rates 200,400] [--num-requests 2000]
        [--speedup 20]
"""

from __future__ import annotations

import argparse
import os
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _route import bench, emulated_engines, route_proxy

from slotune.collector.agent.promtext import PromTextParser
from slotune.tuner.emulate.lag import LagReport
from slotune.tuner.emulate.lag_client import fetch_lag


def _late_steps(urls: list[str]) -> tuple[int, int]:
    """(steps, late steps) of the engines so far."""
    reports = [fetch_lag(u) or LagReport(0, 0) for u in urls]
    return sum(r.num_steps for r in reports), sum(r.num_late_steps for r in reports)


def _run(targets: list[tuple[str, float]], load: list[str]) -> dict[str, Any]:
    """Bench processes at once, one per (url, rate); their figures combined."""
    with ThreadPoolExecutor(len(targets)) as pool:
        summaries = list(pool.map(lambda t: bench(t[0], ["--rate", str(t[1]), *load]), targets))
    errors: dict[str, int] = {}
    for s in summaries:
        for kind, n in s["errors_by_kind"].items():
            errors[kind] = errors.get(kind, 0) + n
    return {
        "req_s": sum(s["request_throughput"] for s in summaries),
        "errors": sum(s["num_errors"] for s in summaries),
        "by_kind": errors,
        # the slower of the parallel runs: the figure a client of the whole fleet would see
        "ttft_p50": max(s["ttft_ms"]["p50"] for s in summaries),
        "ttft_p99": max(s["ttft_ms"]["p99"] for s in summaries),
    }


def _proxy_errors(metrics_url: str) -> dict[str, float]:
    with urllib.request.urlopen(metrics_url) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for fam in PromTextParser().parse(text, source="route").families:
        for s in fam.samples:
            if s.name == "slotune_route_upstream_errors_total":
                key = f"{s.label('backend')}:{s.label('kind')}"
                out[key] = out.get(key, 0.0) + s.value
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="200,400", help="comma-separated req/s")
    ap.add_argument("--num-requests", type=int, default=2000)
    ap.add_argument("--speedup", default="20")
    ap.add_argument("--input-len", default="64")
    ap.add_argument("--output-len", default="8")
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    print(
        f"slotune bench: Poisson at {args.rates} req/s, {args.num_requests} streamed completions "
        f"(input {args.input_len}, output {args.output_len} tokens) per run; two emulated "
        f"llama-3.1-8b/h100-sxm engines at --speedup {args.speedup}; {os.cpu_count()} CPU "
        f"cores shared by engines, proxy and clients; load average before: "
        f"{os.getloadavg()[0]:.1f}"
    )
    rows = []
    flags = ("--speedup", args.speedup)
    with emulated_engines(2, flags=flags) as urls, route_proxy(urls, "least-requests") as proxy:
        for rate in rates:
            for path in ("direct", "proxy"):
                n = args.num_requests // 2 if path == "direct" else args.num_requests
                load = [
                    *("--num-requests", str(n), "--warmup", "20"),
                    *("--input-len", args.input_len, "--output-len", args.output_len),
                ]
                targets = [(u, rate / 2) for u in urls] if path == "direct" else [(proxy.url, rate)]
                steps_before, late_before = _late_steps(urls)
                figures = _run(targets, load)
                steps_after, late_after = _late_steps(urls)
                late = LagReport(steps_after - steps_before, late_after - late_before)
                rows.append((rate, path, figures, late))
        upstream = _proxy_errors(proxy.url + "/metrics")
    print(f"load average after: {os.getloadavg()[0]:.1f}\n")
    print(
        f"{'offered':>8}  {'path':<7}{'req/s':>8}{'errors':>8}{'TTFT p50 ms':>13}"
        f"{'TTFT p99 ms':>13}{'late steps':>12}  errors by kind"
    )
    for rate, path, f, late in rows:
        print(
            f"{rate:>8g}  {path:<7}{f['req_s']:>8.1f}{f['errors']:>8}{f['ttft_p50']:>13.1f}"
            f"{f['ttft_p99']:>13.1f}{late.late_share:>11.1%}  {f['by_kind'] or '-'}"
        )
    print(
        "\nproxy upstream errors over all its runs (backend:kind): "
        f"{upstream or 'none'}; engines' late steps: the share of scheduler steps more than "
        "10 ms of GPU time behind (above 1 %: the engines did not hold the rate on this host)"
    )


if __name__ == "__main__":
    main()
