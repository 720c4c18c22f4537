"""One engine's canonical metrics right now: what a trial reads after its workload ran."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import MappingProxyType

from slotune.collector.agent.base import Family, MetricType, Scrape
from slotune.collector.agent.canonical import CANONICAL
from slotune.collector.agent.fetch import HttpFetcher
from slotune.collector.agent.registry import make_source
from slotune.collector.agent.targets import make_target
from slotune.collector.errors import ConfigError, SourceError
from slotune.collector.store import bucket_quantile
from slotune.collector.vocabulary import engine_kinds


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """A cumulative histogram summed over its label sets.

    Attributes:
        buckets: (upper bound, cumulative count), sorted, ending with +Inf when exposed.
        sum: sum of observations.
        count: number of observations.
    """

    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float

    def quantile(self, q: float) -> float | None:
        """Prometheus-style quantile estimate over everything observed so far."""
        return bucket_quantile(q, self.buckets)

    @property
    def mean(self) -> float | None:
        """Mean observation, None before the first one."""
        return self.sum / self.count if self.count else None


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """Canonical counters, gauges and histograms of one engine at one moment.

    Counters and histograms are summed over label sets (engines, models, finish reasons);
    gauges are summed too, except ratios (``kv_usage``, ``prefix_hit_rate``...), averaged.
    """

    kind: str
    url: str
    ts: float
    counters: Mapping[str, float] = field(default_factory=dict)
    gauges: Mapping[str, float] = field(default_factory=dict)
    histograms: Mapping[str, HistogramSnapshot] = field(default_factory=dict)
    num_skipped_lines: int = 0

    @property
    def prefix_hit_rate(self) -> float | None:
        """hits / queries from the counters when the engine has them, else its own gauge."""
        queries = self.counters.get("prefix_queries")
        hits = self.counters.get("prefix_hits")
        if queries and hits is not None:
            return hits / queries
        return self.gauges.get("prefix_hit_rate")

    @property
    def preemptions(self) -> float | None:
        """Preemptions since the engine started."""
        return self.counters.get("preemptions")

    @property
    def kv_usage(self) -> float | None:
        """KV-cache usage now (0..1)."""
        return self.gauges.get("kv_usage")


def snapshot_from_scrape(kind: str, url: str, scrape: Scrape, ts: float) -> EngineSnapshot:
    """Fold a scrape's canonical families into an :class:`EngineSnapshot`."""
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    histograms: dict[str, HistogramSnapshot] = {}
    for fam in scrape.canonical:
        if fam.type is MetricType.HISTOGRAM:
            histograms[fam.name] = _histogram(fam)
        elif fam.type is MetricType.COUNTER:
            counters[fam.name] = sum(s.value for s in fam.samples)
        elif fam.samples:
            values = [s.value for s in fam.samples]
            is_ratio = CANONICAL[fam.name].unit == "ratio"
            gauges[fam.name] = sum(values) / len(values) if is_ratio else sum(values)
    return EngineSnapshot(
        kind,
        url,
        ts,
        MappingProxyType(counters),
        MappingProxyType(gauges),
        MappingProxyType(histograms),
        len(scrape.skipped),
    )


def _histogram(fam: Family) -> HistogramSnapshot:
    per_le: dict[float, float] = {}
    total = count = 0.0
    for s in fam.samples:
        if s.name.endswith("_bucket"):
            text = s.label("le", "")
            try:
                le = float(text)
            except ValueError:
                raise SourceError(
                    f"{fam.name}: bucket bound le={text!r} is not a number; the endpoint's "
                    "histograms are not Prometheus histograms"
                ) from None
            per_le[le] = per_le.get(le, 0.0) + s.value
        elif s.name.endswith("_sum"):
            total += s.value
        elif s.name.endswith("_count"):
            count += s.value
    return HistogramSnapshot(tuple(sorted(per_le.items())), total, count)


def scrape_snapshot(kind: str, base_url: str, *, timeout_s: float = 5.0) -> EngineSnapshot:
    """Scrape an engine once and return its canonical metrics.

    Safe to call from inside or outside a running event loop (it runs its own loop in a
    worker thread).

    Args:
        kind: an engine's source kind (``vllm``, ``sglang`` ...).
        base_url: the server's base URL (``http://127.0.0.1:8000``) or an explicit metrics URL.
        timeout_s: limit for each HTTP request.

    Returns:
        The snapshot.

    Raises:
        ConfigError: unknown kind or malformed URL.
        SourceError: the engine cannot be read.
    """
    source_kind = next((k for k in engine_kinds() if k.value == kind), None)
    if source_kind is None:
        names = ", ".join(k.value for k in engine_kinds())
        raise ConfigError(f"unknown engine kind {kind!r}; use one of {names}")
    target = make_target(source_kind, base_url, node="local")

    async def collect() -> Scrape:
        source = make_source(target)
        try:
            async with HttpFetcher(timeout_s) as fetch:
                return await source.collect(fetch)
        finally:
            source.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        scrape = pool.submit(asyncio.run, collect()).result()
    return snapshot_from_scrape(kind, base_url, scrape, time.time())
