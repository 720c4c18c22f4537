"""Client-measured TTFT and ITL against the emulated engine's own timings.

Starts ``slotune emulate`` (real time, ``--timings-file``), drives it with 64 concurrent
streams through ``collector.bench``, joins each request to the engine's line by
``X-Request-Id`` and prints the client-minus-engine differences:

- TTFT: (client first token - client send) - (engine first token - engine arrival)
- ITL: each client gap between consecutive token chunks minus the engine's gap between the
  same two tokens.

Targets: |difference| <= 1 ms at p50 and <= 3 ms at p99. Prints figures; asserts nothing.
Also printed: where the TTFT difference arises (client send -> engine arrival, engine first
write -> client read), the client's event-loop lateness, and how long the client and the
engine waited for a CPU while runnable (from /proc/PID/schedstat) with the load average:
on a shared machine that wait, not the code, dominates. ``--fifo`` runs both under
SCHED_FIFO (root; each uses about a quarter of its core) to measure them apart from
other work on the machine.

    .venv/bin/python benchmarks/bench_accuracy.py [--concurrency 8,64] [--requests-per-stream 8]
        [--fifo]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _procs import pin

from slotune.collector.bench import ArrivalSpec, BenchConfig, BenchResult, arun_benchmark
from slotune.collector.bench.arrivals import ArrivalKind
from slotune.tuner.tune.backends.launch import free_port

REPO = Path(__file__).resolve().parents[1]
SLOTUNE = str(Path(sys.executable).parent / "slotune")


def start_emulator(port: int, timings: Path, time_scale: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            SLOTUNE,
            "emulate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--port",
            str(port),
            "--speedup",
            str(time_scale),
            "--max-num-seqs",
            "256",
            "--timings-file",
            str(timings),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "Starting slotune emulated" in line:
            return proc
    raise SystemExit(f"the emulator did not start: {proc.stderr.read() if proc.stderr else ''}")


async def run_with_probe(config: BenchConfig) -> tuple[BenchResult, list[float]]:
    """The run, with a probe of how late the client's event loop wakes up (1 ms sleeps)."""
    lags: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t - 0.001)

    task = asyncio.create_task(probe())
    result = await arun_benchmark(config)
    done.set()
    await task
    return result, lags


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_queue_wait_s(pid: int) -> float:
    """Seconds the process's threads have spent runnable but waiting for a CPU (schedstat)."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        total += int((task / "schedstat").read_text().split()[1]) / 1e9
    return total


def fifo(pid: int) -> bool:
    """Real-time priority, so other work on the machine cannot delay the process."""
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(10))
    except PermissionError:
        return False
    return True


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def line(name: str, diffs_s: list[float]) -> str:
    ms = [d * 1000 for d in diffs_s]
    absolute = [abs(x) for x in ms]
    return (
        f"{name:5s} n={len(ms):6d}  signed p50 {pct(ms, 50):+7.3f} ms  "
        f"|diff| p50 {pct(absolute, 50):6.3f} ms  p99 {pct(absolute, 99):6.3f} ms  "
        f"max {max(absolute):7.3f} ms"
    )


def measure(concurrency: int, num_requests: int, args: argparse.Namespace) -> None:
    """One emulator, one run at ``concurrency`` streams, the differences printed."""
    with tempfile.TemporaryDirectory() as tmp:
        timings_path = Path(tmp) / "timings.jsonl"
        port = free_port()
        emulator = start_emulator(port, timings_path, args.time_scale)
        cores = os.sched_getaffinity(0)
        pinned = not args.no_pin and pin(emulator.pid, 1) and pin(0, 0)
        policy = os.sched_getscheduler(0), os.sched_getparam(0)
        realtime = args.fifo and fifo(emulator.pid) and fifo(0)
        load = os.getloadavg()[0]
        try:
            config = BenchConfig(
                url=f"http://127.0.0.1:{port}",
                input_len=args.input_len,
                output_len=args.output_len,
                num_requests=num_requests,
                warmup=concurrency,
                arrival=ArrivalSpec(ArrivalKind.CONCURRENCY, concurrency=concurrency),
            )
            cpu0, emu0, wall0 = time.process_time(), proc_cpu_s(emulator.pid), time.perf_counter()
            wait0 = run_queue_wait_s(os.getpid()), run_queue_wait_s(emulator.pid)
            result, lags = asyncio.run(run_with_probe(config))
            wall = time.perf_counter() - wall0
            client_cpu = (time.process_time() - cpu0) / wall
            engine_cpu = (proc_cpu_s(emulator.pid) - emu0) / wall
            client_wait = (run_queue_wait_s(os.getpid()) - wait0[0]) / wall
            engine_wait = (run_queue_wait_s(emulator.pid) - wait0[1]) / wall
            load_end = os.getloadavg()[0]
        finally:
            os.sched_setaffinity(0, cores)
            os.sched_setscheduler(0, *policy)
            emulator.terminate()
            emulator.communicate(timeout=30)
        engine = {
            t["request_id"]: t for t in map(json.loads, timings_path.read_text().splitlines())
        }

    ttft_diff: list[float] = []
    itl_diff: list[float] = []
    delivery: list[float] = []
    arrival: list[float] = []
    for r in result.records:
        t = engine.get(r.request_id)
        if t is None or not r.is_ok or r.first_token_s is None or r.ttft_s is None:
            continue
        ttft_diff.append(r.ttft_s - (t["first_token_s"] - t["arrival_s"]))
        delivery.append(r.first_token_s + result.wall_offset_s - t["first_token_s"])
        arrival.append(t["arrival_s"] - (r.send_s + result.wall_offset_s))
        client = [ts for ts, n in zip(r.chunk_times_s, r.chunk_tokens, strict=True) if n > 0]
        server = t["token_times_s"]
        if len(client) == len(server):
            itl_diff += list(np.diff(client) - np.diff(server))
    s = result.summary.to_dict()
    print(
        f"\n{concurrency} concurrent streams, {len(result.records)} measured requests, "
        f"input {args.input_len}, output {args.output_len}; emulated llama-3.1-8b on "
        f"h100-sxm, time scale {args.time_scale:g}; client and engine pinned to cores 0 and 1:"
        f" {pinned}; SCHED_FIFO: {realtime}; load average at start {load:.1f}"
    )
    print(
        f"client: TTFT p50 {s['ttft_ms']['p50']:.2f} ms, ITL p50 {s['itl_ms']['p50']:.2f} ms, "
        f"errors {s['num_errors']}, {s['output_token_throughput']:.0f} output tok/s"
    )
    print("client minus engine:")
    print(line("TTFT", ttft_diff))
    print(line("ITL", itl_diff))
    print(line("deliv", delivery) + "  (engine first-token stamp -> client read)")
    print(line("send", arrival) + "  (client send stamp -> engine arrival stamp)")
    print(
        f"client event-loop lateness p50 {pct(lags, 50) * 1000:.3f} ms, p99 "
        f"{pct(lags, 99) * 1000:.3f} ms; CPU: client {client_cpu:.0%}, engine {engine_cpu:.0%}"
        " of one core"
    )
    print(
        f"waiting for a CPU while runnable: client {client_wait:.1%}, engine {engine_wait:.1%}"
        f" of the run; load average at end {load_end:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="64", help="one or more, e.g. 8,64")
    parser.add_argument("--requests-per-stream", type=int, default=8)
    parser.add_argument("--input-len", default="512")
    parser.add_argument("--output-len", default="uniform:64,192")
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument(
        "--fifo",
        action="store_true",
        help="run client and engine under SCHED_FIFO (root), apart from other work on the machine",
    )
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="leave placement to the OS (better when other work shares core 0)",
    )
    args = parser.parse_args()
    for c in (int(x) for x in args.concurrency.split(",")):
        measure(c, c * args.requests_per_stream, args)
    print("\ntargets: |diff| p50 <= 1 ms, p99 <= 3 ms")


if __name__ == "__main__":
    main()
