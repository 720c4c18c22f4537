"""How much load one client process drives before its own overhead distorts TTFT by > 1 ms.

A minimal streaming server runs in a separate process (on another core when there is one) and
stamps, per request, when it received the request and when it wrote the first token. The
client (``collector.bench``, one process, one event loop) runs Poisson load at rising rates;
for every request, distortion = client TTFT - server TTFT (receive -> first write). The
lowest rate gives the baseline (network + HTTP parsing); a rate is *sustained* while the median
distortion stays within 1 ms of that baseline and the achieved send rate within 5 % of the
offered one. An event-loop probe (a 1 ms sleep, repeatedly) shows how late the client's loop
runs. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/bench_capacity.py [--rates 25,50,...] [--duration 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web

from collector.bench import ArrivalSpec, BenchConfig
from collector.bench.runner import BenchResult, arun_benchmark

TTFT_S = 0.020
TOKEN_INTERVAL_S = 0.005


# --- server process ---------------------------------------------------------------------

def serve(port: int, output_tokens: int) -> None:
    stamps: dict[str, tuple[float, float]] = {}
    words = [json.dumps({"choices": [{"index": 0, "text": " tok", "finish_reason": None}]})
             for _ in range(output_tokens)]
    usage = json.dumps({"choices": [], "usage": {"prompt_tokens": 10,
                                                 "completion_tokens": output_tokens}})
    events = [f"data: {w}\n\n".encode() for w in words]
    tail = f"data: {usage}\n\ndata: [DONE]\n\n".encode()

    async def generate(req: web.Request) -> web.StreamResponse:
        t_recv = time.time()
        await req.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        await asyncio.sleep(TTFT_S)
        t_first = time.time()
        # cool-down requests are cancelled by the client mid-stream
        with contextlib.suppress(ConnectionResetError):
            await resp.write(events[0])
            stamps[req.headers.get("X-Request-Id", "")] = (t_recv, t_first)
            for event in events[1:]:
                await asyncio.sleep(TOKEN_INTERVAL_S)
                await resp.write(event)
            await resp.write(tail)
            await resp.write_eof()
        return resp

    async def timings(_req: web.Request) -> web.Response:
        out = web.json_response(stamps)
        stamps.clear()
        return out

    app = web.Application()
    app.router.add_post("/v1/completions", generate)
    app.router.add_get("/timings", timings)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


# --- client ------------------------------------------------------------------------------

async def loop_lag_probe(stop: asyncio.Event, lags: list[float]) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - t - 0.001)


async def measure(url: str, rate: float, duration_s: float,
                  output_tokens: int) -> tuple[BenchResult, list[float], dict[str, Any]]:
    config = BenchConfig(url=url, model="m", arrival=ArrivalSpec.from_rate(rate),
                         input_len="16", output_len=str(output_tokens), duration_s=duration_s,
                         warmup=int(rate), ignore_eos=False, timeout_s=30)
    stop = asyncio.Event()
    lags: list[float] = []
    probe = asyncio.create_task(loop_lag_probe(stop, lags))
    result = await arun_benchmark(config)
    stop.set()
    await probe
    async with aiohttp.ClientSession() as s, s.get(f"{url}/timings") as r:
        stamps = await r.json()
    return result, lags, stamps


def row(*cells: str) -> str:
    return " ".join(f"{c:>9}" for c in cells)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pin(pid: int, core: int) -> bool:
    cores = os.sched_getaffinity(0)
    if len(cores) < 2 or core not in cores:
        return False
    os.sched_setaffinity(pid, {core})
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="25,50,100,200,400,800,1600")
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.output_tokens)
        return

    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port),
                               "--output-tokens", str(args.output_tokens)])
    pinned = pin(server.pid, 1) and pin(0, 0)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.1)
    print(f"server: TTFT {TTFT_S * 1000:.0f} ms, {args.output_tokens} tokens "
          f"{TOKEN_INTERVAL_S * 1000:.0f} ms apart; client and server pinned to cores 0 and 1: "
          f"{pinned}; load average {os.getloadavg()[0]:.1f}")
    print(row("rate", "offered", "achieved", "tok/s", "in flight", "lag p50", "lag p99",
              "dist p50", "dist p99", "loop p99", "errors"))
    baseline: float | None = None
    best: tuple[float, float] | None = None
    try:
        for rate in (float(r) for r in args.rates.split(",")):
            result, lags, stamps = asyncio.run(measure(url, rate, args.duration,
                                                       args.output_tokens))
            dist = [r.ttft_s - (stamps[r.request_id][1] - stamps[r.request_id][0])
                    for r in result.records
                    if r.is_ok and r.ttft_s is not None and r.request_id in stamps]
            s = result.summary.to_dict()
            p50, p99 = (np.percentile(dist, [50, 99]) * 1000) if dist else (np.nan, np.nan)
            baseline = p50 if baseline is None else baseline
            lag = s["send_lag_ms"] or {"p50": np.nan, "p99": np.nan}
            in_flight = s["request_throughput"] * s["e2e_ms"]["mean"] / 1000 \
                if s["e2e_ms"]["mean"] else 0.0
            print(row(f"{rate:.0f}", f"{s['offered_rate'] or 0:.1f}",
                      f"{s['achieved_rate'] or 0:.1f}", f"{s['output_token_throughput']:.0f}",
                      f"{in_flight:.1f}", f"{lag['p50']:.3f}", f"{lag['p99']:.3f}",
                      f"{p50:.3f}", f"{p99:.3f}", f"{np.percentile(lags, 99) * 1000:.3f}",
                      str(s["num_errors"])))
            kept_up = (s["achieved_rate"] or 0) >= 0.95 * (s["offered_rate"] or rate)
            if p50 - baseline <= 1.0 and kept_up and s["num_errors"] == 0:
                best = (rate, s["output_token_throughput"])
            else:
                break
    finally:
        server.terminate()
        server.wait(10)
    print(f"(lag = send lag, dist = client TTFT - server TTFT, loop = event-loop oversleep; ms; "
          f"baseline distortion {baseline:.3f} ms)")
    if best:
        print(f"sustained: {best[0]:.0f} req/s, {best[1]:.0f} streamed tokens/s "
              "(median TTFT distortion within 1 ms of the baseline)")
    else:
        print("no rate sustained")


if __name__ == "__main__":
    main()
