"""Agent CPU, memory and write rate while scraping many engines every second.

Starts N emulated engines (``slotune emulate``, real vLLM-sized /metrics: ~460 lines, ~40 KB;
``--fake`` serves a recorded copy of one from a single helper process instead), one
``slotune agent`` process scraping all of them every ``--interval`` into a SQLite store, and
samples the agent's CPU time and RSS from /proc every ``--sample-every`` seconds. The first
``--warmup`` seconds (imports, series creation) are left out of the figures.

Prints: CPU % of one core, samples written per second, RSS at each sample and the RSS trend
(least-squares slope, extrapolated to one hour). Usage::

    .venv/bin/python benchmarks/agent_cpu.py --engines 20 --duration 150
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from slotune.tuner.tune.backends.launch import free_port

BIN = Path(sys.executable).parent
TICKS = os.sysconf("SC_CLK_TCK")
FAKE_SERVER = r"""
import sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
body = open(sys.argv[1], "rb").read()
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
for port in sys.argv[2:]:
    s = ThreadingHTTPServer(("127.0.0.1", int(port)), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def num_samples(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return int(conn.execute("SELECT count(*) FROM sample").fetchone()[0])


def wait_ready(proc: subprocess.Popen[str], marker: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if marker in line:
            return
    raise SystemExit(f"helper did not start: {proc.stderr.read() if proc.stderr else ''}")


Procs = list[subprocess.Popen[str]]


def start_engines(n: int, fake: bool, workdir: Path) -> tuple[list[int], Procs]:
    ports = [free_port() for _ in range(n)]
    procs: list[subprocess.Popen[str]] = []
    if fake:
        sample = start_engines(1, False, workdir)
        body = workdir / "vllm_metrics.prom"
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{sample[0][0]}/metrics") as r:
            body.write_bytes(r.read())
        for p in sample[1]:
            p.terminate()
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", FAKE_SERVER, str(body), *map(str, ports)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        wait_ready(procs[0], "ready")
        return ports, procs
    for i in range(n):
        for attempt in range(3):  # a free port can be taken by another process meanwhile
            proc = subprocess.Popen(
                [
                    str(BIN / "slotune"),
                    "emulate",
                    "--model",
                    "llama-3.1-8b",
                    "--gpu",
                    "h100-sxm",
                    "--port",
                    str(ports[i]),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                wait_ready(proc, "Starting slotune emulated")
                break
            except SystemExit:
                proc.wait()
                if attempt == 2:
                    for started in procs:  # do not leave the engines already running behind
                        started.terminate()
                        started.wait(timeout=20)
                    raise
                ports[i] = free_port()
        procs.append(proc)
    return ports, procs


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    cov = sum((t - mean_t) * (y - mean_y) for t, y in points)
    return cov / var * 3600.0 if var else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", type=int, default=20)
    ap.add_argument("--duration", type=float, default=150.0, help="measured seconds")
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--interval", default="1s")
    ap.add_argument("--sample-every", type=float, default=10.0)
    ap.add_argument("--fake", action="store_true", help="recorded payload, one helper process")
    ap.add_argument(
        "--heartbeat",
        default="60s",
        help="agent --heartbeat; 0s writes every sample (as if every value changed)",
    )
    args = ap.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="slotune-agent-bench-"))
    db = workdir / "store.db"
    procs: list[subprocess.Popen[str]] = []
    try:
        ports, procs = start_engines(args.engines, args.fake, workdir)
        targets = workdir / "targets.yaml"
        targets.write_text(
            "targets:\n"
            + "".join(
                f"  - {{kind: vllm, url: 'http://127.0.0.1:{p}', labels: {{model: llama}}}}\n"
                for p in ports
            )
        )
        db_url = f"sqlite:///{db}"
        agent_log = (workdir / "agent.log").open("w")
        subprocess.run(
            [str(BIN / "slotune"), "--db", db_url, "db", "upgrade"], check=True, capture_output=True
        )
        agent = subprocess.Popen(
            [
                str(BIN / "slotune"),
                "--db",
                db_url,
                "agent",
                "--targets",
                str(targets),
                "--interval",
                args.interval,
                "--heartbeat",
                args.heartbeat,
                "--spool-dir",
                str(workdir / "spool"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=agent_log,
            text=True,
        )
        procs.append(agent)
        time.sleep(args.warmup)
        if agent.poll() is not None:
            raise SystemExit(f"the agent exited: {(workdir / 'agent.log').read_text()[-2000:]}")
        t0, cpu0, rows0 = time.monotonic(), cpu_seconds(agent.pid), num_samples(db)
        rss: list[tuple[float, float]] = [(0.0, rss_mib(agent.pid))]
        print(f"{'t (s)':>6} {'CPU % (window)':>15} {'RSS MiB':>8} {'samples/s':>10}")
        last_t, last_cpu, last_rows = t0, cpu0, rows0
        while time.monotonic() - t0 < args.duration:
            time.sleep(args.sample_every)
            if agent.poll() is not None:
                raise SystemExit(f"the agent exited: {(workdir / 'agent.log').read_text()[-2000:]}")
            now, cpu, rows = time.monotonic(), cpu_seconds(agent.pid), num_samples(db)
            rss.append((now - t0, rss_mib(agent.pid)))
            print(
                f"{now - t0:6.0f} {100 * (cpu - last_cpu) / (now - last_t):15.2f} "
                f"{rss[-1][1]:8.1f} {(rows - last_rows) / (now - last_t):10.0f}",
                flush=True,
            )
            last_t, last_cpu, last_rows = now, cpu, rows
        wall = last_t - t0
        print(
            f"\nengines: {args.engines} ({'fake servers' if args.fake else 'slotune emulate'}),"
            f" interval {args.interval}, heartbeat {args.heartbeat}, measured {wall:.0f} s"
            f" after {args.warmup:.0f} s warm-up"
        )
        print(f"agent CPU: {100 * (last_cpu - cpu0) / wall:.2f} % of one core")
        print(f"samples written: {(last_rows - rows0) / wall:.0f} /s")
        print(
            f"RSS: {rss[0][1]:.1f} -> {rss[-1][1]:.1f} MiB; trend {slope_per_hour(rss):+.1f} "
            f"MiB/hour (least squares over {wall:.0f} s, extrapolated)"
        )
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT if p is procs[-1] else signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
