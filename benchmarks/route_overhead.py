"""What ``slotune route`` adds to a request: ``slotune bench`` direct to a stub backend vs
through the proxy in front of it.

The backend is a fast stub (``_stub_backend.py``: raw asyncio, one streamed completion of 4
tokens per request, thousands of requests a second), so the figures are the proxy's own
and not an engine's queueing. ``slotune bench`` drives Poisson load at each of ``--rates``
with streamed completions, alternating direct and proxied runs ``--repeats`` times so
drift in the machine's load hits both alike. Prints per run the end-to-end latency p50 /
p99 and errors, then per rate the medians over the repeats and the added latency (proxy -
direct), with the load average before and after each rate, and the requests a second the
stub holds alone (64 streams at once). Asserts nothing.

    .venv/bin/python benchmarks/route_overhead.py [--rates 200,400,800] [--seconds 10]
        [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import NamedTuple

from _route import bench, route_proxy, stub_backend

_WARMUP = 100


class Run(NamedTuple):
    rate: float
    path: str
    p50_ms: float
    p99_ms: float
    num_errors: int
    num_requests: int


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="200,400,800", help="comma-separated req/s")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each run")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    print(
        f"slotune bench: Poisson at {args.rates} req/s for {args.seconds:g} s per run "
        f"({_WARMUP} warm-up requests), streamed completions of 4 tokens from a stub backend; "
        f"{args.repeats} direct + {args.repeats} proxied runs alternating per rate; "
        f"{os.cpu_count()} CPU cores shared by stub, proxy and client"
    )
    runs: list[Run] = []
    loads: dict[float, tuple[str, str]] = {}
    with stub_backend() as stub, route_proxy([stub], "least-requests") as proxy:
        for rate in rates:
            num = int(rate * args.seconds)
            load = [
                *("--rate", str(rate), "--num-requests", str(num)),
                *("--input-len", "16", "--output-len", "4", "--warmup", str(_WARMUP)),
                *("--timeout", "60"),
            ]
            before = _load()
            for i in range(args.repeats):
                for path, url in (("direct", stub), ("proxy", proxy.url)):
                    s = bench(url, [*load, "--seed", str(i)])
                    e2e = s["e2e_ms"]
                    runs.append(Run(rate, path, e2e["p50"], e2e["p99"], s["num_errors"], num))
            loads[rate] = (before, _load())
        # what the stub holds: a closed loop of 64 at once, as fast as it answers
        capacity = bench(
            stub,
            [
                *("--concurrency", "64", "--num-requests", "20000", "--warmup", str(_WARMUP)),
                *("--input-len", "16", "--output-len", "4", "--timeout", "60"),
            ],
        )
    print(f"\n{'rate':>6}  {'path':<8}{'E2E p50 ms':>11}{'E2E p99 ms':>11}{'errors':>14}")
    for r in runs:
        print(
            f"{r.rate:>6g}  {r.path:<8}{r.p50_ms:>11.2f}{r.p99_ms:>11.2f}"
            f"{r.num_errors:>7} / {r.num_requests}"
        )
    print(
        f"\n{'rate':>6}  {'direct p50/p99 ms':>19}{'proxy p50/p99 ms':>19}"
        f"{'added p50/p99 ms':>19}{'proxy errors':>14}  load avg 1/5/15 min before -> after"
    )
    for rate in rates:
        med = {
            path: (
                statistics.median(r.p50_ms for r in runs if r.rate == rate and r.path == path),
                statistics.median(r.p99_ms for r in runs if r.rate == rate and r.path == path),
            )
            for path in ("direct", "proxy")
        }
        errors = sum(r.num_errors for r in runs if r.rate == rate and r.path == "proxy")
        (d50, d99), (p50, p99) = med["direct"], med["proxy"]
        print(
            f"{rate:>6g}  {d50:>8.2f} /{d99:>8.2f}{p50:>10.2f} /{p99:>7.2f}"
            f"{p50 - d50:>+10.2f} /{p99 - d99:>+7.2f}{errors:>14}  "
            f"{loads[rate][0]} -> {loads[rate][1]}"
        )
    print(
        f"stub backend alone, 64 streams at once: {capacity['request_throughput']:,.0f} req/s, "
        f"{capacity['num_errors']} errors of {capacity['num_requests']}"
    )
    print(
        "(medians over the repeats; targets: 0 errors at 400 req/s, added p99 <= 1 ms at 200 "
        "and <= 3 ms at 400)"
    )


if __name__ == "__main__":
    main()
