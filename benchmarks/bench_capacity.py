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
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
from _procs import pin
from aiohttp import web

from slotune.collector.bench import ArrivalSpec, BenchConfig
from slotune.collector.bench.client import _Stream
from slotune.collector.bench.result import BenchResult
from slotune.collector.bench.runner import arun_benchmark
from slotune.collector.bench.sse import SSEDecoder
from slotune.collector.workload.tokens import count_tokens
from slotune.tuner.tune.backends.launch import free_port

TTFT_S = 0.020
CLIENT_CPU: list[float] = []  # client process CPU / wall time of each measurement
TOKEN_INTERVAL_S = 0.005


# --- server process ---------------------------------------------------------------------


def serve(port: int, output_tokens: int) -> None:
    stamps: dict[str, tuple[float, float, float]] = {}
    head = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": "m"}
    words = [
        json.dumps(
            {
                **head,
                "choices": [{"index": 0, "text": " tok", "logprobs": None, "finish_reason": None}],
                "usage": None,
            }
        )
        for _ in range(output_tokens)
    ]
    usage = json.dumps(
        {
            **head,
            "choices": [],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": output_tokens,
                "total_tokens": 10 + output_tokens,
            },
        }
    )
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
            t_last = t_first
            for event in events[1:]:
                await asyncio.sleep(TOKEN_INTERVAL_S)
                t_last = time.time()
                await resp.write(event)
            rid = req.headers.get("X-Request-Id") or f"anonymous-{len(stamps)}"
            stamps[rid] = (t_recv, t_first, t_last)
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


async def measure_config(
    url: str, config: BenchConfig
) -> tuple[BenchResult, list[float], dict[str, Any]]:
    stop = asyncio.Event()
    lags: list[float] = []
    probe = asyncio.create_task(loop_lag_probe(stop, lags))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = await arun_benchmark(config)
    CLIENT_CPU.append((time.process_time() - cpu0) / (time.perf_counter() - wall0))
    stop.set()
    await probe
    return result, lags, fetch_timings(url)


def fetch_timings(url: str) -> dict[str, Any]:
    """Server stamps since the last fetch (and clear them)."""
    with urllib.request.urlopen(f"{url}/timings", timeout=30) as resp:
        data: dict[str, Any] = json.loads(resp.read())
    return data


def measure(
    url: str, rate: float, duration_s: float, output_tokens: int
) -> tuple[BenchResult, list[float], dict[str, Any]]:
    config = BenchConfig(
        url=url,
        model="m",
        arrival=ArrivalSpec.from_rate(rate),
        input_len="16",
        output_len=str(output_tokens),
        duration_s=duration_s,
        warmup=int(rate),
        ignore_eos=False,
        timeout_s=30,
    )
    return asyncio.run(measure_config(url, config))


def parse_cost_us(n: int = 50_000) -> float:
    """CPU time per streamed event of the client's read path (SSE decode, JSON, count)."""
    head = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": "m"}
    event = (
        "data: "
        + json.dumps(
            {
                **head,
                "choices": [{"index": 0, "text": " tok", "logprobs": None, "finish_reason": None}],
            }
        )
        + "\n\n"
    ).encode()
    decoder, state = SSEDecoder(), _Stream(count_tokens)
    start = time.perf_counter()
    for _ in range(n):
        for payload in decoder.feed(event):
            state.event(payload, 0.0)
    return (time.perf_counter() - start) / n * 1e6


def row(*cells: str) -> str:
    return " ".join(f"{c:>9}" for c in cells)


def wait_for(port: int) -> None:
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.1)


# --- side by side with AIPerf -------------------------------------------------------------

_MAKE_TOKENIZER = """
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
words = "tok the of and to in a is that for it as with be on not by this you have from at"
vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(sorted(set(words.split())))}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.decoder = decoders.WordPiece(prefix="##")
tok.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps(
    {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"}))
"""


def server_truth(stamps: dict[str, Any], rid: str, output_tokens: int) -> tuple[float, float]:
    t_recv, t_first, t_last = stamps[rid]
    return t_first - t_recv, (t_last - t_first) / (output_tokens - 1)


def per_request_line(
    tool: str,
    ttft_s: list[float],
    tpot_s: list[float],
    ttft_err_s: list[float],
    tpot_err_s: list[float],
) -> str:
    def p(v: list[float], q: float) -> str:
        return f"{np.percentile(v, q) * 1000:.3f}" if v else "-"

    return row(
        tool,
        str(len(ttft_s)),
        p(ttft_s, 50),
        p(ttft_s, 99),
        p(ttft_err_s, 50),
        p(ttft_err_s, 99),
        p(tpot_s, 50),
        p(tpot_err_s, 50),
        p(tpot_err_s, 99),
    )


def compare_with_aiperf(
    aiperf: Path, url: str, rate: float, count: int, output_tokens: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tok_dir, art = Path(tmp) / "tokenizer", Path(tmp) / "artifacts"
        subprocess.run(
            [str(aiperf.parent / "python"), "-c", _MAKE_TOKENIZER, str(tok_dir)], check=True
        )
        config = BenchConfig(
            url=url,
            model="m",
            arrival=ArrivalSpec.from_rate(rate),
            input_len="16",
            output_len=str(output_tokens),
            num_requests=count,
            ignore_eos=False,
            timeout_s=30,
            cooldown=False,
        )
        ours, _, stamps = asyncio.run(measure_config(url, config))
        ttft, tpot, e_ttft, e_tpot = [], [], [], []
        for r in ours.records:
            if r.is_ok and r.request_id in stamps and r.ttft_s and r.tpot_s:
                s_ttft, s_tpot = server_truth(stamps, r.request_id, output_tokens)
                ttft.append(r.ttft_s)
                tpot.append(r.tpot_s)
                e_ttft.append(r.ttft_s - s_ttft)
                e_tpot.append(r.tpot_s - s_tpot)
        subprocess.run(
            [
                str(aiperf),
                "profile",
                "--model",
                "m",
                "--url",
                url,
                "--endpoint-type",
                "completions",
                "--streaming",
                "--request-rate",
                str(rate),
                "--request-count",
                str(count),
                "--isl",
                "16",
                "--osl",
                str(output_tokens),
                "--tokenizer",
                str(tok_dir),
                "--artifact-dir",
                str(art),
                "--random-seed",
                "1",
                "--ui-type",
                "none",
                "--no-gpu-telemetry",
                "--no-server-metrics",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        peer_stamps = fetch_timings(url)
        a_ttft, a_tpot, a_e_ttft, a_e_tpot = [], [], [], []
        for line in (art / "profile_export.jsonl").read_text().splitlines():
            rec = json.loads(line)
            rid, m = rec["metadata"].get("x_request_id"), rec.get("metrics", {})
            if rid not in peer_stamps or "time_to_first_token" not in m:
                continue
            s_ttft, s_tpot = server_truth(peer_stamps, rid, output_tokens)
            t = m["time_to_first_token"]["value"] / 1000
            i = m["inter_token_latency"]["value"] / 1000
            a_ttft.append(t)
            a_tpot.append(i)
            a_e_ttft.append(t - s_ttft)
            a_e_tpot.append(i - s_tpot)
    print(
        f"\nside by side at {rate:g} req/s Poisson, {count} requests, 16 in / "
        f"{output_tokens} out tokens, same server (errors = tool minus server, ms):"
    )
    print(
        row(
            "tool",
            "requests",
            "TTFT p50",
            "TTFT p99",
            "err p50",
            "err p99",
            "TPOT p50",
            "err p50",
            "err p99",
        )
    )
    print(per_request_line("slotune", ttft, tpot, e_ttft, e_tpot))
    print(per_request_line("aiperf", a_ttft, a_tpot, a_e_ttft, a_e_tpot))
    print(
        f"(AIPerf's 'inter token latency' is per request (e2e - ttft)/(tokens - 1): our tpot;"
        f" slotune itl p50 {ours.summary.itl_ms.percentiles[50.0]:.3f} ms, pooled per token)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="25,50,100,200,400,800,1600")
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument(
        "--aiperf",
        type=Path,
        help="an AIPerf executable in its own venv: also run the same load with it and compare",
    )
    parser.add_argument("--compare-rate", type=float, default=50.0)
    parser.add_argument("--compare-requests", type=int, default=500)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.output_tokens)
        return

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--output-tokens", str(args.output_tokens)]
    )
    pinned = pin(server.pid, 1) and pin(0, 0)
    url = f"http://127.0.0.1:{port}"
    wait_for(port)
    print(f"client read path: {parse_cost_us():.1f} us of CPU per streamed event")
    print(
        f"server: TTFT {TTFT_S * 1000:.0f} ms, {args.output_tokens} tokens "
        f"{TOKEN_INTERVAL_S * 1000:.0f} ms apart; client and server pinned to cores 0 and 1: "
        f"{pinned}; load average {os.getloadavg()[0]:.1f}"
    )
    print(
        row(
            "rate",
            "offered",
            "achieved",
            "tok/s",
            "in flight",
            "lag p50",
            "lag p99",
            "dist p50",
            "dist p99",
            "loop p99",
            "client cpu",
            "errors",
        )
    )
    baseline: float | None = None
    best: tuple[float, float] | None = None
    try:
        for rate in (float(r) for r in args.rates.split(",")):
            result, lags, stamps = measure(url, rate, args.duration, args.output_tokens)
            dist = [
                r.ttft_s - (stamps[r.request_id][1] - stamps[r.request_id][0])
                for r in result.records
                if r.is_ok and r.ttft_s is not None and r.request_id in stamps
            ]
            s = result.summary.to_dict()
            p50, p99 = (np.percentile(dist, [50, 99]) * 1000) if dist else (np.nan, np.nan)
            baseline = p50 if baseline is None else baseline
            lag = s["send_lag_ms"] or {"p50": np.nan, "p99": np.nan}
            in_flight = (
                s["request_throughput"] * s["e2e_ms"]["mean"] / 1000 if s["e2e_ms"]["mean"] else 0.0
            )
            print(
                row(
                    f"{rate:.0f}",
                    f"{s['offered_rate'] or 0:.1f}",
                    f"{s['achieved_rate'] or 0:.1f}",
                    f"{s['output_token_throughput']:.0f}",
                    f"{in_flight:.1f}",
                    f"{lag['p50']:.3f}",
                    f"{lag['p99']:.3f}",
                    f"{p50:.3f}",
                    f"{p99:.3f}",
                    f"{np.percentile(lags, 99) * 1000:.3f}",
                    f"{CLIENT_CPU[-1]:.0%}",
                    str(s["num_errors"]),
                )
            )
            kept_up = (s["achieved_rate"] or 0) >= 0.95 * (s["offered_rate"] or rate)
            if p50 - baseline <= 1.0 and kept_up and s["num_errors"] == 0:
                best = (rate, s["output_token_throughput"])
            else:
                break
    finally:
        server.terminate()
        server.wait(10)
    print(
        f"(lag = send lag, dist = client TTFT - server TTFT, loop = event-loop oversleep; ms; "
        f"client cpu = CPU time / wall time; baseline distortion {baseline:.3f} ms)"
    )
    if best:
        print(
            f"sustained: {best[0]:.0f} req/s, {best[1]:.0f} streamed tokens/s "
            "(median TTFT distortion within 1 ms of the baseline)"
        )
    else:
        print("no rate sustained")
    if args.aiperf:
        server = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve",
                str(port),
                "--output-tokens",
                str(args.output_tokens),
            ]
        )
        pin(server.pid, 1)
        wait_for(port)
        try:
            compare_with_aiperf(
                args.aiperf, url, args.compare_rate, args.compare_requests, args.output_tokens
            )
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
