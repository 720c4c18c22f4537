"""Store benchmark: sample ingest rate and window-query latency on SQLite and PostgreSQL.

Loads ``--days`` of 5-second scrapes of ``--targets`` vLLM-like targets, each exposing the
TTFT histogram ``vllm:time_to_first_token_seconds`` with vLLM's 22 finite buckets + ``+Inf``
and its ``_sum`` / ``_count`` (25 cumulative series per target, one engine restart per target
on the third day), through ``write_samples`` in batches of 20,000 samples (the agent's
default ``batch_max``: the batch size it writes whenever a backlog is waiting, i.e. whenever
the ingest rate matters), then times ``histogram_quantile`` p99 over the last hour and the
last 24 hours for one target.

    .venv/bin/python benchmarks/store_ingest.py                  # SQLite, 7 days x 10 targets
    .venv/bin/python benchmarks/store_ingest.py --quick          # SQLite, 1 day x 2 targets
    .venv/bin/python benchmarks/store_ingest.py --backend postgresql --quick

PostgreSQL: ``--pg-url`` or, when omitted, a throw-away server started with initdb/pg_ctl
(as the test fixture does). Prints one JSON object of figures. Besides the wall-clock rate
it prints the rate per CPU second of this process (``samples_per_cpu_s``): on a machine
shared with other jobs that one moves less; for PostgreSQL it leaves out the server's CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from slotune.collector.store import (
    SampleIn,
    Store,
    histogram_quantile,
    open_store,
    upgrade,
    write_samples,
)
from slotune.tuner.emulate.vllm_metrics import TTFT_BUCKETS_S

FAMILY = "vllm:time_to_first_token_seconds"
BUCKETS = TTFT_BUCKETS_S  # vLLM V1's TTFT buckets, as the emulated engine exposes them
LES = (*(f"{b:g}" for b in BUCKETS), "+Inf")
SCRAPE_S = 5.0
DAY_S = 86400.0


def day_of_scrapes(
    target: str,
    day: int,
    t0: float,
    rng: np.random.Generator,
    start_counts: np.ndarray,
    start_sum: float,
    batch_scrapes: int = 64,
) -> tuple[list[list[SampleIn]], np.ndarray, float]:
    """One day of scrapes of one target as write batches of ``batch_scrapes`` scrapes."""
    n = int(DAY_S / SCRAPE_S)
    per_scrape = rng.poisson(40, size=n)  # ~8 requests/s
    # log-normal TTFTs around 80 ms, histogrammed per scrape
    ttft = rng.lognormal(np.log(0.08), 0.8, size=int(per_scrape.sum()))
    bucket_of = np.searchsorted(np.asarray(BUCKETS), ttft, side="left")
    scrape_of = np.repeat(np.arange(n), per_scrape)
    hist = np.zeros((n, len(LES)))
    np.add.at(hist, (scrape_of, bucket_of), 1)
    cumulative = np.cumsum(np.cumsum(hist, axis=1), axis=0)
    sums = np.cumsum(np.bincount(scrape_of, weights=ttft, minlength=n))
    if day == 2:  # an engine restart at noon: counters start from zero again
        cumulative[n // 2 :] -= cumulative[n // 2 - 1]
        sums[n // 2 :] -= sums[n // 2 - 1]
        start_counts, start_sum = np.zeros(len(LES)), 0.0
    cumulative += start_counts
    sums += start_sum
    labels = [{"model_name": "meta-llama/Llama-3.1-8B-Instruct", "le": le} for le in LES]
    plain = {"model_name": "meta-llama/Llama-3.1-8B-Instruct"}
    batches: list[list[SampleIn]] = []
    batch: list[SampleIn] = []
    for i in range(n):
        ts = t0 + day * DAY_S + i * SCRAPE_S
        row = cumulative[i].tolist()
        batch.extend(
            SampleIn(target, f"{FAMILY}_bucket", "histogram", labels[j], ts, row[j])
            for j in range(len(LES))
        )
        batch.append(SampleIn(target, f"{FAMILY}_sum", "histogram", plain, ts, float(sums[i])))
        batch.append(SampleIn(target, f"{FAMILY}_count", "histogram", plain, ts, row[-1]))
        if len(batch) >= batch_scrapes * (len(LES) + 2):
            batches.append(batch)
            batch = []
    if batch:
        batches.append(batch)
    return batches, cumulative[-1], float(sums[-1])


def load(store: Store, days: int, targets: int, t0: float, batch_scrapes: int) -> dict[str, float]:
    """Write the data set day by day; returns samples written and the time write_samples took."""
    rng = np.random.default_rng(7)
    state = {f"node-{k}/vllm": (np.zeros(len(LES)), 0.0) for k in range(targets)}
    written, seconds, cpu_s = 0, 0.0, 0.0
    for day in range(days):
        for target, (counts, total) in state.items():
            batches, last_counts, last_sum = day_of_scrapes(
                target, day, t0, rng, counts, total, batch_scrapes
            )
            state[target] = (last_counts, last_sum)
            start, start_cpu = time.perf_counter(), time.process_time()
            for batch in batches:
                written += write_samples(store, batch)
            seconds += time.perf_counter() - start
            cpu_s += time.process_time() - start_cpu
        print(
            f"  day {day + 1}/{days}: {written:,} samples, {written / seconds:,.0f}/s, "
            f"{written / cpu_s:,.0f}/CPU-s",
            file=sys.stderr,
            flush=True,
        )
    return {
        "samples": written,
        "batch_samples": batch_scrapes * (len(LES) + 2),
        "write_s": seconds,
        "samples_per_s": written / seconds,
        "write_cpu_s": cpu_s,
        "samples_per_cpu_s": written / cpu_s,
    }


def time_query(
    store: Store, target: str, end_ts: float, window_s: float, repeat: int = 7
) -> dict[str, float | None]:
    timings, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = histogram_quantile(store, target, FAMILY, 0.99, end_ts - window_s, end_ts)
        timings.append((time.perf_counter() - start) * 1000)
    return {
        "p99_ttft_s": value,
        "first_ms": timings[0],
        "median_ms": statistics.median(timings),
        "max_ms": max(timings),
    }


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A PostgreSQL cluster in a temp dir on a free port (as user postgres when root)."""
    import socket

    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    if not bins:
        raise SystemExit("PostgreSQL binaries not found: apt-get install postgresql")
    root = Path(tempfile.mkdtemp(prefix="slotune-bench-pg-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(root, user="postgres")

    def pg(*args: str) -> None:
        subprocess.run(
            [*as_user, str(bins[-1] / args[0]), *args[1:]], check=True, capture_output=True
        )

    pg("initdb", "-D", f"{root}/data", "-U", "postgres", "--auth=trust", "--no-sync")
    # Default durability (fsync on), unlike the test fixture: these are ingest figures.
    pg(
        "pg_ctl",
        "-D",
        f"{root}/data",
        "-l",
        f"{root}/log",
        "-w",
        "-o",
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1",
        "start",
    )
    try:
        subprocess.run(
            [
                *as_user,
                str(bins[-1] / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "postgres",
                "bench",
            ],
            check=True,
        )
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/bench"
    finally:
        pg("pg_ctl", "-D", f"{root}/data", "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def run(url: str, days: int, targets: int, batch_scrapes: int) -> dict[str, object]:
    upgrade(url)
    t0 = 1_750_000_000.0
    with open_store(url) as store:
        ingest = load(store, days, targets, t0, batch_scrapes)
        end = t0 + days * DAY_S - SCRAPE_S
        return {
            "url": store.url,
            "days": days,
            "targets": targets,
            "series_per_target": len(LES) + 2,
            "ingest": ingest,
            "query_1h": time_query(store, "node-0/vllm", end, 3600.0),
            "query_24h": time_query(store, "node-0/vllm", end, DAY_S),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--targets", type=int, default=10)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run: 1 day x 2 targets (overrides --days/--targets)",
    )
    parser.add_argument(
        "--batch-scrapes",
        type=int,
        default=800,
        help="scrapes of one target per write_samples call (25 samples each)",
    )
    parser.add_argument("--pg-url", help="an empty PostgreSQL database (default: start one)")
    args = parser.parse_args()
    if args.quick:
        args.days, args.targets = 1, 2
    if args.backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="slotune-bench-") as tmp:
            result = run(f"sqlite:///{tmp}/bench.db", args.days, args.targets, args.batch_scrapes)
            result["db_bytes"] = sum(p.stat().st_size for p in Path(tmp).iterdir())
    elif args.pg_url:
        result = run(args.pg_url, args.days, args.targets, args.batch_scrapes)
    else:
        with throwaway_postgres() as url:
            result = run(url, args.days, args.targets, args.batch_scrapes)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
