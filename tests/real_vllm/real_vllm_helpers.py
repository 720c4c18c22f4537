"""Helpers of the real-vLLM tests: the agent scraping in the background, /metrics snapshots
read with Prometheus' own parser, and a bounded load on the tiny model."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from slotune.collector.agent.base import SourceKind
from slotune.collector.agent.loop import Agent
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import TargetSpec, make_target
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.bench import BenchConfig, BenchResult, run_benchmark
from slotune.collector.store import upgrade

SCRAPE_INTERVAL_S = 0.5
# Long enough for two scrapes after the last response, so the store holds the final counters.
SETTLE_S = 4 * SCRAPE_INTERVAL_S


@dataclass(frozen=True, slots=True)
class Exposition:
    """One ``GET /metrics`` of vLLM: every sample by (name, sorted labels)."""

    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]
    family_types: dict[str, str]

    def value(self, name: str, **labels: str) -> float:
        """The sum over every series named ``name`` whose labels include ``labels``."""
        return sum(
            v
            for (n, lb), v in self.samples.items()
            if n == name and all((k, x) in lb for k, x in labels.items())
        )

    def buckets(self, family: str) -> list[tuple[float, float]]:
        """(upper bound, cumulative count) of a histogram, summed over its series."""
        bounds: dict[float, float] = {}
        for (n, lb), v in self.samples.items():
            if n == f"{family}_bucket":
                le = float(dict(lb)["le"])
                bounds[le] = bounds.get(le, 0.0) + v
        return sorted(bounds.items())


def read_metrics(url: str) -> Exposition:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return Exposition(samples, types)


def delta(after: Exposition, before: Exposition, name: str, **labels: str) -> float:
    return after.value(name, **labels) - before.value(name, **labels)


@contextlib.contextmanager
def agent_running(targets: Sequence[TargetSpec], db: str, spool: Path) -> Iterator[None]:
    """``slotune agent``'s loop scraping ``targets`` into ``db`` from a background thread."""
    agent = Agent(list(targets), StoreWriter(db, Spool(spool), flush_interval_s=0.1), timeout_s=10)
    stop = threading.Event()

    def run() -> None:
        async def until_stopped() -> None:
            task = asyncio.create_task(agent.run())
            while not stop.is_set():
                await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        asyncio.run(until_stopped())

    # daemon: an agent that failed to stop must not keep the test run from exiting
    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        time.sleep(SETTLE_S)
        yield
        time.sleep(SETTLE_S)
    finally:
        stop.set()
        runner.join(timeout=60)
        agent.close()


@dataclass(frozen=True, slots=True)
class Window:
    """A bench run on one engine while the agent scraped it into a fresh store ``db``, as
    target ``TARGET``; ``before`` and ``after`` are vLLM's /metrics around the load."""

    db: str
    start: float
    end: float
    before: Exposition
    after: Exposition
    result: BenchResult


TARGET = "real-vllm"


def measured_window(url: str, tmp_path: Path, config: BenchConfig) -> Window:
    db = f"sqlite:///{tmp_path / 'slotune.db'}"
    upgrade(db)
    target = make_target(SourceKind.VLLM, url, name=TARGET, node="n1", interval_s=SCRAPE_INTERVAL_S)
    with agent_running([target], db, tmp_path / "spool"):
        before = read_metrics(url)
        start = time.time()
        result = run_benchmark(config)
    end = time.time()
    after = read_metrics(url)
    assert result.summary.num_errors == 0, result.summary.errors_by_kind
    return Window(db, start, end, before, after, result)
