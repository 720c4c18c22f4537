"""Reading a fleet's metrics in place: a real Prometheus backfilled with N vLLM targets.

Backfills a Prometheus TSDB (``promtool tsdb create-blocks-from openmetrics``) with
``--targets`` engines (TTFT histogram, finished requests by reason, KV usage) over
``--hours`` at ``--step`` seconds, serves it on loopback, and times through the metrics
contract (``--metrics``): an alert round of ``--rules`` SLO rules, ``slo list --json``'s
figures for all of them, the overview page, the fleet page for one pool, and ``metrics
summary`` for one target, each ``--repeats`` times (the median, and the queries each
sent); then the agent's remote-write encoding on one core. Prints one table, the load
average before and after (the figures are wall times), and the process's peak memory.

    .venv/bin/python benchmarks/fleet_metrics.py --targets 1000 --hours 2 --step 60
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from slotune.collector.agent.remote_write import encode
from slotune.collector.alerts import evaluate_all
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.metrics import PromClient, Series, summarize_metrics
from slotune.collector.slo import parse_slo_yaml
from slotune.collector.store import SampleIn, open_store, upgrade
from slotune.collector.views import fleet_table, overview, slo_figures

BOUNDS = ("0.05", "0.1", "0.25", "0.5", "1.0", "2.5")
TTFT = "vllm:time_to_first_token_seconds_bucket"


def instance(i: int) -> str:
    return f"10.0.{i // 250}.{i % 250}:8000"


def write_openmetrics(path: Path, targets: int, points: int, step: float, base: float) -> int:
    """The traffic, family by family; returns the number of samples."""
    n = 0
    with path.open("w") as f:
        families = {
            TTFT: [(f'le="{le}"', 10.0 * (k + 1)) for k, le in enumerate((*BOUNDS, "+Inf"))],
            "vllm:request_success_total": [
                ('finished_reason="stop"', 99.0),
                ('finished_reason="abort"', 1.0),
            ],
            "vllm:kv_cache_usage_perc": [("", 0.0)],
        }
        for name, variants in families.items():
            f.write(f"# TYPE {name} unknown\n")
            for i in range(targets):
                ids = f'job="vllm",instance="{instance(i)}",pool="pool-{i % 10}",model_name="m"'
                for extra, per_step in variants:
                    labels = ids + ("," + extra if extra else "")
                    for p in range(points):
                        value = per_step * p if per_step else 0.3 + 0.4 * ((p + i) % 10) / 10
                        f.write(f"{name}{{{labels}}} {value:g} {base + p * step:.0f}\n")
                        n += 1
        f.write("# EOF\n")
    return n


def slos_yaml(rules: int, targets: int) -> str:
    lines = ["slos:"]
    for k in range(rules):
        sel = f"{{pool: pool-{k % 10}}}" if k % 2 else f"{{target: vllm/{instance(k % targets)}}}"
        spec = "ttft:p99<=500ms" if k % 4 < 2 else "error_rate<=1%"
        lines.append(
            f"  - {{name: slo-{k}, spec: '{spec}', window: 2h, selector: {sel}, alerting: "
            "{windows: [{severity: page, long: 1h, short: 5m, factor: 14.4}, "
            "{severity: ticket, long: 2h, short: 30m, factor: 3}]}}"
        )
    return "\n".join(lines) + "\n"


class CountingClient(PromClient):
    """Counts the queries sent."""

    def __init__(self, url: str, timeout_s: float) -> None:
        super().__init__(url, timeout_s=timeout_s)
        self.sent: list[str] = []

    def query(self, expr: str, at_ts: float) -> list[Series]:
        self.sent.append(expr)
        return super().query(expr, at_ts)

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[Series]:
        self.sent.append(expr)
        return super().query_range(expr, start, end, step_s)


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def encode_rate(num_samples: int = 100_000) -> float:
    batch = [
        SampleIn(
            f"node-{i % 100}",
            "vllm:num_requests_running",
            "gauge",
            {"gpu": str(i % 8)},
            1e9 + i,
            float(i),
        )
        for i in range(num_samples)
    ]
    seconds, _ = timed(lambda: encode(batch))
    return num_samples / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=int, default=1000)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--step", type=float, default=60.0)
    ap.add_argument("--rules", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    promtool, prometheus = shutil.which("promtool"), shutil.which("prometheus")
    if not promtool or not prometheus:
        sys.exit("needs prometheus and promtool (Debian package 'prometheus')")
    points = int(args.hours * 3600 / args.step) + 1
    base = (int(time.time()) // 3600 - int(args.hours) - 4) * 3600.0
    at = base + (points - 1) * args.step
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        om = root / "fleet.om"
        gen_s, num = timed(lambda: write_openmetrics(om, args.targets, points, args.step, base))
        fill_s, _ = timed(
            lambda: subprocess.run(
                [
                    promtool,
                    "tsdb",
                    "create-blocks-from",
                    "openmetrics",
                    str(om),
                    str(root / "tsdb"),
                ],
                check=True,
                capture_output=True,
            )
        )
        (root / "prometheus.yml").write_text("global: {scrape_interval: 1m}\nscrape_configs: []\n")
        port = 19090
        server = subprocess.Popen(
            [
                prometheus,
                f"--config.file={root / 'prometheus.yml'}",
                f"--storage.tsdb.path={root / 'tsdb'}",
                "--storage.tsdb.retention.time=10y",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    urllib.request.urlopen(url + "/-/ready", timeout=2)
                    break
                except OSError:
                    time.sleep(0.2)
            db = f"sqlite:///{root / 'slotune.db'}"
            upgrade(db)
            client = CountingClient(url, timeout_s=120)
            with open_store(db) as store:
                apply_slos(store, parse_slo_yaml(slos_yaml(args.rules, args.targets)))
                rows = [
                    ("alert round", lambda: evaluate_all(store, at, metrics=client)),
                    ("slo list --json", lambda: slo_figures(store, end_ts=at, metrics=client)),
                    ("overview page", lambda: overview(store, end_ts=at, metrics=client)),
                    (
                        "fleet page, one pool",
                        lambda: fleet_table(store, at - 3600, at, pool="pool-0", metrics=client),
                    ),
                    (
                        "metrics summary, one target",
                        lambda: summarize_metrics(
                            store,
                            target=f"vllm/{instance(0)}",
                            window_s=3600,
                            end_ts=at,
                            metrics=client,
                        ),
                    ),
                ]
                print(
                    f"{args.targets} targets x {args.hours:g} h at {args.step:g} s: {num} samples "
                    f"(written in {gen_s:.1f} s, backfilled in {fill_s:.1f} s); {args.rules} SLO rules"
                )
                print(load())
                print(f"{'read through Prometheus':32} {'seconds':>8} {'queries':>8}  rows")
                for name, fn in rows:
                    runs = []
                    for _ in range(args.repeats):
                        client.sent = []
                        seconds, out = timed(fn)
                        runs.append(seconds)
                    size = len(out) if isinstance(out, list) else ""
                    median = statistics.median(runs)
                    print(f"{name:32} {median:8.2f} {len(client.sent):8d}  {size}")
                print(load())
            client.close()
        finally:
            server.terminate()
            server.wait(timeout=60)
    print(f"{'remote-write encoding':32} {encode_rate():8.0f} samples/s (one core)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{'peak memory of this process':32} {peak:8.0f} MiB")


if __name__ == "__main__":
    main()
