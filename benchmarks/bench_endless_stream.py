"""`slotune bench` against a server that streams without end: time and memory stay bounded.

A raw TCP server on 127.0.0.1 answers every completion request with SSE token chunks as fast
as it can write them, never ending. `slotune bench --timeout T` runs N requests at once
against it as a subprocess; this prints the command's wall time, its peak RSS (getrusage of
the child), its exit status, and what the saved records hold (chunks timed per request, chunks
only counted). Usage::

    .venv/bin/python benchmarks/bench_endless_stream.py --requests 10 --timeout 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent
_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
_TOKEN = b'data: {"choices":[{"index":0,"text":"a","finish_reason":null}]}\n\n'


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(x.split(b":")[1])
                for x in head.split(b"\r\n")
                if x.lower().startswith(b"content-length")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(_HEAD)
        while True:
            writer.write(_TOKEN * 64)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


def _start_server() -> int:
    ready: list[int] = []
    started = threading.Event()

    async def main() -> None:
        server = await asyncio.start_server(_serve, "127.0.0.1", 0)
        ready.append(server.sockets[0].getsockname()[1])
        started.set()
        await asyncio.Event().wait()

    threading.Thread(target=lambda: asyncio.run(main()), daemon=True).start()
    started.wait(10)
    return ready[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args()
    port = _start_server()
    with tempfile.TemporaryDirectory() as d:
        saved = Path(d) / "run.json"
        cmd = [
            str(BIN / "slotune"), "bench", "--url", f"http://127.0.0.1:{port}", "--served-model-name", "m",
            "--input-len", "16", "--output-len", "16", "--rate", "inf",
            "--num-requests", str(args.requests), "--timeout", str(args.timeout),
            "--no-store", "--json", "--save", str(saved),
        ]  # fmt: skip
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall_s = time.perf_counter() - started
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        records = json.loads(saved.read_text())["records"] if saved.exists() else []
    print(
        f"server: endless SSE on 127.0.0.1, {args.requests} requests at once, --timeout {args.timeout:g}"
    )
    print(f"exit status {proc.returncode}; wall {wall_s:.1f} s; peak RSS {peak_mib:.0f} MiB")
    kinds = sorted({r["error"] or "ok" for r in records})
    timed = [len(r["chunk_times_s"]) for r in records]
    untimed = [r["num_untimed_chunks"] for r in records]
    print(f"records {len(records)} ({', '.join(kinds)}); timed chunks per request max {max(timed, default=0)}; "
          f"counted-only chunks per request max {max(untimed, default=0)}")  # fmt: skip
    print(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "")


if __name__ == "__main__":
    main()
