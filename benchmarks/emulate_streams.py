"""Concurrent streams against the emulated engine: completion, client-vs-server timing, jitter.

Starts ``slotune emulate`` in this process (real engine core, time scale 1 unless told
otherwise), then a separate client process opens N concurrent streaming completions. Prints,
per N: how many streams completed with all their tokens, the wall time, the real-time loop's
scheduling lateness (how long after its deadline each step's tokens went out: p50/p90/p99/max),
and the gap between the client's TTFT / mean ITL and the server's own timings for the same
requests (mean and max absolute difference).

    .venv/bin/python benchmarks/emulate_streams.py --streams 64 256 512 --max-tokens 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import aiohttp

from slotune.tuner.emulate.server import Emulator, build_emulator


def _client_main(url: str, num: int, max_tokens: int, out: str) -> None:
    # aiohttp rather than httpx: its client costs far less CPU per chunk, so on a small
    # machine the figures describe the server rather than the client.
    async def run() -> list[dict[str, object]]:
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

            async def one(i: int) -> dict[str, object]:
                times: list[float] = []
                body = {
                    "prompt": f"stream {i} " + "context " * 200,
                    "max_tokens": max_tokens,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
                send = time.time()
                async with session.post(
                    f"{url}/v1/completions", json=body, headers={"X-Request-Id": f"b{i}"}
                ) as r:
                    async for line in r.content:
                        if line.startswith(b"data: {") and b'"choices":[{' in line:
                            times.append(time.time())
                return {"id": f"b{i}", "send": send, "chunks": times}

            return list(await asyncio.gather(*(one(i) for i in range(num))))

    Path(out).write_text(json.dumps(asyncio.run(run())))


def _serve_in_thread(emulator: Emulator) -> tuple[int, asyncio.AbstractEventLoop, asyncio.Event]:
    ready = threading.Event()
    box: dict[str, object] = {}

    def on_ready(port: int) -> None:
        box["port"] = port
        ready.set()

    def main() -> None:
        async def run() -> None:
            stop = asyncio.Event()
            box["loop"], box["stop"] = asyncio.get_running_loop(), stop
            await emulator.serve(stop, on_ready=on_ready)

        asyncio.run(run())

    threading.Thread(target=main, daemon=True).start()
    ready.wait(30)
    return int(box["port"]), box["loop"], box["stop"]  # type: ignore[return-value]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def bench(num: int, max_tokens: int, time_scale: float, model: str, gpu: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        timings = Path(tmp) / "t.jsonl"
        emulator = build_emulator(
            [
                "--model",
                model,
                "--gpu",
                gpu,
                "--port",
                "0",
                "--max-num-seqs",
                "1024",
                "--speedup",
                str(time_scale),
                "--timings-file",
                str(timings),
            ]
        )
        port, loop, stop = _serve_in_thread(emulator)
        out = Path(tmp) / "client.json"
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--client",
                f"http://127.0.0.1:{port}",
                str(num),
                str(max_tokens),
                str(out),
            ],
            check=True,
        )
        wall_s = time.perf_counter() - start
        lateness_ms = [x * 1000 for x in emulator.engine.lateness_s]
        loop.call_soon_threadsafe(stop.set)
        time.sleep(1.5)
        client = {c["id"]: c for c in json.loads(out.read_text())}
        server = {d["request_id"]: d for d in map(json.loads, timings.read_text().splitlines())}
    complete = sum(
        1
        for c in client.values()
        if len(c["chunks"]) > 0 and server.get(c["id"], {}).get("completion_tokens") == max_tokens
    )
    ttft_diff, itl_diff = [], []
    for rid, c in client.items():
        s = server.get(rid)
        if s is None or len(c["chunks"]) < 2:
            continue
        ttft_diff.append(abs((c["chunks"][0] - c["send"]) - (s["first_token_s"] - s["arrival_s"])))
        client_itl = (c["chunks"][-1] - c["chunks"][0]) / (max_tokens - 1)
        server_itl = (s["token_times_s"][-1] - s["first_token_s"]) / (max_tokens - 1)
        itl_diff.append(abs(client_itl - server_itl))
    print(
        f"streams={num} max_tokens={max_tokens} time_scale={time_scale}: "
        f"complete={complete}/{num} wall={wall_s:.2f}s steps={len(lateness_ms)} "
        f"lateness_ms p50={_pct(lateness_ms, 0.5):.3f} p90={_pct(lateness_ms, 0.9):.3f} "
        f"p99={_pct(lateness_ms, 0.99):.3f} "
        f"max={max(lateness_ms, default=0):.3f} | |client-server| ttft_ms "
        f"mean={statistics.fmean(ttft_diff) * 1000:.2f} max={max(ttft_diff) * 1000:.2f} "
        f"itl_ms mean={statistics.fmean(itl_diff) * 1000:.3f} max={max(itl_diff) * 1000:.3f}"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        _client_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", type=int, nargs="+", default=[64, 256, 512])
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--gpu", default="h100-sxm")
    args = p.parse_args()
    for num in args.streams:
        bench(num, args.max_tokens, args.time_scale, args.model, args.gpu)


if __name__ == "__main__":
    main()
