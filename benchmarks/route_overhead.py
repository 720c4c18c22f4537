"""What ``slotune route`` adds to TTFT: ``slotune bench`` direct to an engine vs through the proxy.

One emulated engine (llama-3.1-8b on h100-sxm, real time, pinned to core 0 when there are
two) serves both paths; ``slotune bench`` drives Poisson load at each of ``--rates`` with
streamed completions, alternating direct and proxied runs ``--repeats`` times so drift in the
machine's load hits both alike. Prints, side by side, TTFT p50 / p99 per run and the medians over the
repeats, the added TTFT (proxy - direct), and the proxy's own time per request from its
``slotune_route_overhead_seconds`` histogram (request received -> upstream request sent).
Asserts nothing.

    .venv/bin/python benchmarks/route_overhead.py [--rates 50,200] [--num-requests 1000]
        [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import urllib.request

from _route import bench, emulated_engines, route_proxy

from slotune.collector.agent.promtext import PromTextParser


def overhead_quantiles(metrics_url: str) -> tuple[float, float, int]:
    """(mean, p99 upper bucket bound, count) of the proxy's overhead histogram, in ms."""
    with urllib.request.urlopen(metrics_url) as r:
        text = r.read().decode()
    buckets: list[tuple[float, float]] = []
    total = count = 0.0
    for fam in PromTextParser().parse(text, source="route").families:
        for s in fam.samples:
            if s.name == "slotune_route_overhead_seconds_bucket":
                buckets.append((float(s.label("le")), s.value))
            elif s.name == "slotune_route_overhead_seconds_sum":
                total = s.value
            elif s.name == "slotune_route_overhead_seconds_count":
                count = s.value
    p99 = next(le for le, c in sorted(buckets) if c >= 0.99 * count)
    return 1000 * total / max(count, 1), 1000 * p99, int(count)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="200", help="comma-separated req/s, e.g. 50,200")
    ap.add_argument("--num-requests", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--input-len", default="256")
    ap.add_argument("--output-len", default="32")
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    print(
        f"slotune bench: Poisson at {args.rates} req/s, {args.num_requests} streamed completions "
        f"(input {args.input_len}, output {args.output_len} tokens, 50 warm-up) per run, "
        f"{args.repeats} direct + {args.repeats} proxied runs alternating per rate; one emulated "
        f"llama-3.1-8b/h100-sxm engine, real time; {os.cpu_count()} CPU cores shared by "
        f"engine, proxy and client; load average before: {os.getloadavg()[0]:.1f}"
    )
    rows: list[tuple[float, str, float, float, int]] = []
    cpu_ms: list[float] = []  # the proxy's CPU time per request of each proxied run
    with (
        emulated_engines(1, core=0) as [engine],
        # the engine is the only backend: wait for its connections as the direct client does
        route_proxy([engine], "least-requests", "timeouts: {connect: 60s}\n") as proxy,
    ):
        for rate in rates:
            load = [
                *("--rate", str(rate), "--num-requests", str(args.num_requests)),
                *("--input-len", args.input_len, "--output-len", args.output_len),
                *("--warmup", "50"),
            ]
            for i in range(args.repeats):
                for path, url in (("direct", engine), ("proxy", proxy.url)):
                    cpu_before = proxy.cpu_s()
                    s = bench(url, [*load, "--seed", str(i)])
                    if path == "proxy":
                        cpu_ms.append(
                            1000 * (proxy.cpu_s() - cpu_before) / (args.num_requests + 50)
                        )
                    ttft = s["ttft_ms"]
                    rows.append((rate, path, ttft["p50"], ttft["p99"], s["num_errors"]))
        mean_ms, p99_ms, num = overhead_quantiles(proxy.url + "/metrics")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"\n{'rate':>6}  {'path':<8}{'TTFT p50 ms':>12}{'TTFT p99 ms':>12}{'errors':>8}")
    for rate, path, p50, p99, errors in rows:
        print(f"{rate:>6g}  {path:<8}{p50:>12.2f}{p99:>12.2f}{errors:>8}")
    print(
        f"\n{'rate':>6}  {'direct p50/p99 ms':>20}{'proxy p50/p99 ms':>20}{'added p50/p99 ms':>20}"
    )
    for rate in rates:
        med = {
            path: [
                statistics.median(r[k] for r in rows if r[0] == rate and r[1] == path)
                for k in (2, 3)
            ]
            for path in ("direct", "proxy")
        }
        d, p = med["direct"], med["proxy"]
        print(
            f"{rate:>6g}  {d[0]:>9.2f} /{d[1]:>8.2f}{p[0]:>11.2f} /{p[1]:>8.2f}"
            f"{p[0] - d[0]:>+11.2f} /{p[1] - d[1]:>+8.2f}"
        )
    print("(medians over the repeats; target: added TTFT p99 < 1 ms at 200 req/s)")
    print(
        f"proxy's own time per request (received -> sent upstream), {num} requests: "
        f"mean {mean_ms:.3f} ms, p99 <= {p99_ms:.3f} ms (histogram bucket bound)"
    )
    print(
        "proxy's CPU time per request (whole hop: parse, route, relay every chunk): median "
        f"{statistics.median(cpu_ms):.3f} ms over the proxied runs"
    )


if __name__ == "__main__":
    main()
