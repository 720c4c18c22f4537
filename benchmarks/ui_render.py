"""Server time to render each dashboard page on a large store, on SQLite and PostgreSQL.

The store holds ``--targets`` vLLM targets (4 pools) scraped every ``--scrape-s`` seconds:
the last ``--raw-hours`` as raw scrapes, the ``--days`` before as one point per
``--rollup-s`` step (what ``slotune db prune --rollup-after`` leaves; every page reads
cumulative series at instants, so history costs index depth, not scans), plus ``--runs``
benchmark runs (a fifth of them as one ``--find-max-rate`` search), ``--studies`` simulated
tuning studies and SLOs with their burn-rate rules.

Each page is run with Streamlit's ``AppTest`` (script start to last element) with every
cache cleared first, ``--repeat`` times; the median and the worst are printed, with the
fleet page over 1 h and over 30 d. Seeding bypasses the agent: series are created through
the store's writer, their history bulk-inserted.

    .venv/bin/python benchmarks/ui_render.py                      # SQLite and PostgreSQL
    .venv/bin/python benchmarks/ui_render.py --backend sqlite --targets 20 --days 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection, text
from store_ingest import throwaway_postgres

from slotune.collector.alerts.rules import parse_rule
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.records import RequestRecord
from slotune.collector.slo import parse_slo_yaml
from slotune.collector.store import (
    BenchRunMeta,
    SampleIn,
    Store,
    open_store,
    register_target,
    save_alert_rule,
    save_bench_run,
    upgrade,
    write_samples,
)
from slotune.collector.summary import summarize

PAGES = Path(__file__).resolve().parents[1] / "ui" / "app" / "screens"
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, math.inf)
LATENCIES = {"ttft": 0.15, "itl": 0.02, "tpot": 0.025, "e2e": 4.0}  # median seconds
COUNTERS = ("e2e_count", "generation_tokens", "prompt_tokens", "preemptions")
COUNTERS_L = ("prefix_queries", "prefix_hits")
GAUGES = {
    "requests_running": 40.0,
    "requests_waiting": 3.0,
    "kv_usage": 0.6,
    "vram_used": 70e9,
    "vram_total": 80e9,
    "gpu_utilization": 0.8,
    "power_watts": 600.0,
    "up": 1.0,
}
POOLS = ("chat", "code", "batch", "long-context")
SLOS = """
slos:
  - {name: chat-ttft, spec: "ttft:p99<=500ms", selector: {pool: chat}}
  - {name: chat-itl, spec: "itl:p99<=50ms", selector: {pool: chat}}
  - {name: code-e2e, spec: "e2e:p90<=10s", selector: {pool: code}}
  - {name: fleet-ttft, spec: "ttft:p95<=1s"}
  - {name: fleet-errors, spec: "error_rate<=1%"}
"""


def _le(b: float) -> str:
    return "+Inf" if math.isinf(b) else repr(b)


def _cdf(b: float, median: float) -> float:
    """Share of requests within ``b`` for a log-normal latency (sigma 0.6)."""
    if math.isinf(b):
        return 1.0
    return 0.5 * math.erfc(-math.log(b / median) / (0.6 * math.sqrt(2)))


def _series_values(name: str, labels: dict[str, str], i: int, ts: np.ndarray) -> np.ndarray:
    """The cumulative or gauge value of one series at every instant."""
    rate = 2.0 + (i % 7) * 0.5  # requests/s of target i
    elapsed = ts - ts[0]
    if name.endswith("_bucket"):
        fam = name[: -len("_bucket")]
        return rate * elapsed * _cdf(float(labels["le"]), LATENCIES[fam] * (1 + (i % 5) * 0.2))
    if name.endswith("_count"):
        return rate * elapsed
    if name.endswith("_sum"):
        return rate * elapsed * LATENCIES[name[: -len("_sum")]]
    per_request = {
        "generation_tokens": 250.0,
        "prompt_tokens": 600.0,
        "preemptions": 0.01,
        "prefix_queries": 600.0,
        "prefix_hits": 250.0,
        "requests_finished": 1.0,
    }
    if name in per_request:
        return rate * elapsed * per_request[name]
    base = GAUGES[name]
    wave = 1.0 if name in ("up", "vram_total") else 1.0 + 0.1 * np.sin(ts / 3600.0 + i)
    return base * wave


def _first_scrape(target: str, ts: float) -> list[SampleIn]:
    out = []
    for fam in LATENCIES:
        out += [
            SampleIn(target, f"{fam}_bucket", "histogram", {"le": _le(b)}, ts, 0.0) for b in BUCKETS
        ]
        out += [SampleIn(target, f"{fam}_{s}", "histogram", {}, ts, 0.0) for s in ("count", "sum")]
    out += [SampleIn(target, c, "counter", {}, ts, 0.0) for c in COUNTERS + COUNTERS_L]
    out += [
        SampleIn(target, "requests_finished", "counter", {"finished_reason": r}, ts, 0.0)
        for r in ("stop", "abort")
    ]
    out += [SampleIn(target, g, "gauge", {}, ts, 0.0) for g in GAUGES]
    return out


def seed_fleet(store: Store, args: argparse.Namespace, now: float) -> int:
    """Targets and their history; returns the number of sample rows."""
    raw_from = now - args.raw_hours * 3600
    start = raw_from - args.days * 86400
    ts = np.concatenate(
        [np.arange(start, raw_from, args.rollup_s), np.arange(raw_from, now, args.scrape_s)]
    )
    rows = 0
    for i in range(args.targets):
        name = f"node-{i:03d}/vllm"
        register_target(
            store,
            name,
            "vllm",
            f"http://10.0.{i // 256}.{i % 256}:8000/metrics",
            {
                "pool": POOLS[i % len(POOLS)],
                "node": f"node-{i:03d}",
                "model": "llama-3.1-8b",
                "gpu": "H100-SXM",
            },
        )
        write_samples(store, _first_scrape(name, float(ts[0]) - 1))
    with store.connection() as conn:
        series = conn.execute(
            text(
                "SELECT m.id, t.name, m.name, m.labels FROM metric_series m "
                "JOIN target t ON t.id = m.target_id"
            )
        ).all()
        for sid, target, name, labels in series:
            labels = labels if isinstance(labels, dict) else json.loads(labels)
            if name == "requests_finished" and labels.get("finished_reason") == "abort":
                values = _series_values("requests_finished", labels, int(target[5:8]), ts) * 0.002
            else:
                values = _series_values(name, labels, int(target[5:8]), ts)
            data = list(
                zip(
                    [sid] * len(ts),
                    ts.tolist(),
                    np.broadcast_to(values, ts.shape).tolist(),
                    strict=True,
                )
            )
            _bulk_insert(conn, data)
            rows += len(data)
        conn.execute(text("UPDATE metric_series SET rollup_until_ts = :t"), {"t": raw_from})
        conn.execute(text("UPDATE target SET last_seen_at = :t"), {"t": float(ts[-1])})
    return rows


def _bulk_insert(conn: Connection, data: list[tuple[int, float, float]]) -> None:
    raw: Any = conn.connection.driver_connection
    if conn.dialect.name == "postgresql":
        with raw.cursor() as cur, cur.copy("COPY sample (series_id, ts, value) FROM STDIN") as copy:
            for row in data:
                copy.write_row(row)
    else:
        raw.executemany("INSERT INTO sample (series_id, ts, value) VALUES (?, ?, ?)", data)


def seed_results(store: Store, url: str, args: argparse.Namespace, now: float) -> None:
    """SLOs and rules, benchmark runs, tuning studies."""
    slos = parse_slo_yaml(SLOS)
    apply_slos(store, slos)
    for expr, name in (
        ("kv_usage > 0.9 for 5m", "kv-full"),
        ("requests_waiting > 20 for 2m", "queue"),
    ):
        save_alert_rule(store, parse_rule(expr, name=name).to_info())
    rng = np.random.default_rng(0)
    for r in range(args.runs):
        search = r < args.runs // 5
        rate = 1.0 + r if search else 5.0
        records = []
        for k in range(200):
            t0 = k / rate
            ttft = float(rng.lognormal(math.log(0.1 + 0.02 * r * search), 0.5))
            chunks = tuple(t0 + ttft + 0.02 * j for j in range(30))
            records.append(
                RequestRecord(f"r{k}", t0, chunks[0], chunks[-1], chunks, (1,) * 30, 600, 30)
            )
        meta = BenchRunMeta(
            "llama poisson (max-rate)" if search else f"run {r}",
            "http://10.0.0.1:8000",
            "llama-3.1-8b",
            "azure-conv",
            now - 3600 * (args.runs - r),
            None,
            {"arrival": {"kind": "poisson", "rate": rate}},
        )
        save_bench_run(store, meta, records, summarize(records, slos[:2]).to_dict())
    from slotune.tuner import RunOptions, tune_study
    from slotune.tuner.tune.new_study import new_study_spec

    for k in range(args.studies):
        spec = new_study_spec(
            name=f"study-{k:02d}",
            backend="sim",
            engine="vllm",
            model="llama-3.1-8b",
            gpu="h100-sxm",
            workload="azure-conv",
            trace_file=None,
            slos=("ttft:p99<=500ms", "itl:p99<=50ms"),
            objective="goodput",
            trials=args.trials,
            rate=4.0,
            num_requests=60,
            seed=k,
            recheck_k=0,
        )
        tune_study(spec, url, RunOptions())


# The page runs inside a wrapper script that times it from its first to its last line, so
# AppTest's own costs (package scan, polling for widget deltas) stay out of the figures.
_WRAPPER = """
import runpy, sys, time
_t0 = time.perf_counter()
try:
    runpy.run_path({path!r}, run_name="__main__")
finally:
    sys.modules["ui_render_timing"].elapsed.append(time.perf_counter() - _t0)
"""


def render(url: str, page: str, query: dict[str, str], repeat: int) -> list[float]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from slotune.ui.app._common import _store

    timing = types.ModuleType("ui_render_timing")
    timing.elapsed = []  # type: ignore[attr-defined]
    sys.modules["ui_render_timing"] = timing
    os.environ["SLOTUNE_DB"] = url
    for _ in range(repeat):
        st.cache_data.clear()
        _store.clear()
        at = AppTest.from_string(
            _WRAPPER.format(path=str(PAGES / f"{page}.py")), default_timeout=600
        )
        for k, v in query.items():
            at.query_params[k] = v
        at.run()
        if at.exception or at.error:
            raise SystemExit(f"{page}: {[e.value for e in [*at.exception, *at.error]]}")
    _store.clear()
    return list(timing.elapsed)  # type: ignore[attr-defined]


VIEWS = (
    ("overview", "overview", {}),
    ("fleet 1h (table only)", "fleet", {"range": "1h"}),
    ("fleet 30d (table only)", "fleet", {"range": "30d"}),
    ("fleet 1h, a pool of 25", "fleet", {"range": "1h", "pool": "chat"}),
    ("fleet 30d, a pool of 25", "fleet", {"range": "30d", "pool": "chat"}),
    ("fleet 30d, one target", "fleet", {"range": "30d", "pool": "chat", "target": "node-000/vllm"}),
    ("slos", "slos", {}),
    ("alerts", "alerts", {}),
    ("benchmarks", "benchmarks", {}),
    ("tuning", "tuning", {}),
    ("diagnosis", "diagnosis", {}),
)


def run(url: str, backend: str, args: argparse.Namespace) -> None:
    upgrade(url)
    now = time.time()
    t0 = time.perf_counter()
    with open_store(url) as store:
        rows = seed_fleet(store, args, now)
        t_fleet = time.perf_counter() - t0
        seed_results(store, url, args, now)
    print(
        f"\n{backend}: {args.targets} targets x {rows // args.targets:,} samples "
        f"({rows:,} rows; {args.days} d at {args.rollup_s:g} s + {args.raw_hours} h at "
        f"{args.scrape_s:g} s), {args.runs} runs, {args.studies} studies x {args.trials} trials; "
        f"seeded in {time.perf_counter() - t0:.0f} s (fleet {t_fleet:.0f} s)",
        flush=True,
    )
    print(f"{'page':<30}{'median s':>10}{'worst s':>10}")
    for label, page, query in VIEWS:
        times = render(url, page, query, args.repeat)
        print(f"{label:<30}{statistics.median(times):>10.3f}{max(times):>10.3f}", flush=True)


@contextmanager
def sqlite_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="slotune-ui-bench-") as d:
        yield f"sqlite:///{d}/store.db"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--raw-hours", type=float, default=1.0)
    parser.add_argument("--scrape-s", type=float, default=5.0)
    parser.add_argument("--rollup-s", type=float, default=3600.0)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--studies", type=int, default=20)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--pg-url", help="an empty PostgreSQL database (default: a throw-away server)"
    )
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}", flush=True)
    if args.backend in ("sqlite", "both"):
        with sqlite_url() as url:
            run(url, "sqlite", args)
    if args.backend in ("postgresql", "both"):
        if args.pg_url:
            run(args.pg_url, "postgresql", args)
        else:
            with throwaway_postgres() as url:
                run(url, "postgresql", args)


if __name__ == "__main__":
    main()
