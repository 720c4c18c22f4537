"""An engine's ``/metrics`` sampled while a workload runs, and its counters' change over it.

Gauges such as KV-cache usage and the queue are only meaningful while requests are in the
engine: read after a run they are back to 0. So a background thread scrapes every
:data:`SAMPLE_INTERVAL_S` during the run and keeps the peak and mean; counters (prefix-cache
queries and hits, preemptions, finished requests) are read before and after, and their
difference is the run's own figure, not the engine's lifetime one (an attached engine may have
served for days). The counters are the engine's source rules' canonical ones (SGLang: prompt
and cached tokens, finished requests, retractions where the release exports them), so nothing
here names an engine.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from slotune.collector.agent import EngineSnapshot, scrape_snapshot
from slotune.collector.errors import SourceError
from slotune.collector.run_figures import ScrapedEngineFigures

SAMPLE_INTERVAL_S = 0.5
# Counters whose change over a run is reported (canonical names).
_DELTA_COUNTERS = ("prefix_queries", "prefix_hits", "preemptions", "requests_finished")


@dataclass(frozen=True, slots=True)
class RunEngineFigures:
    """What the engine's ``/metrics`` said over one run.

    Attributes:
        num_samples: scrapes taken during the run.
        kv_usage_max, kv_usage_mean: KV-cache usage (0..1) over the samples.
        waiting_max, running_max: the most requests waiting / running in one sample.
        deltas: canonical counter -> its increase over the run.
        errors: why scrapes failed (first one only; the run itself is not affected).
    """

    num_samples: int = 0
    kv_usage_max: float | None = None
    kv_usage_mean: float | None = None
    waiting_max: float | None = None
    running_max: float | None = None
    deltas: dict[str, float] = field(default_factory=dict)
    errors: tuple[str, ...] = ()

    @property
    def prefix_hit_rate(self) -> float | None:
        """Prefix-cache hits / queries over the run (None without queries)."""
        queries = self.deltas.get("prefix_queries")
        hits = self.deltas.get("prefix_hits")
        return hits / queries if queries and hits is not None else None

    def to_figures(self) -> ScrapedEngineFigures:
        """The figures as a run summary carries them (``engine_*`` in its JSON)."""
        return ScrapedEngineFigures(
            num_samples=self.num_samples,
            kv_usage_max=self.kv_usage_max,
            kv_usage_mean=self.kv_usage_mean,
            waiting_max=self.waiting_max,
            running_max=self.running_max,
            prefix_hit_rate=self.prefix_hit_rate,
            preemptions=self.deltas.get("preemptions"),
        )


class MetricsWatch:
    """Samples one engine's metrics; use :meth:`during` around a run."""

    def __init__(self, kind: str, url: str, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.kind, self.url, self.interval_s = kind, url, interval_s

    def snapshot(self) -> EngineSnapshot | None:
        """One scrape, None when the engine cannot be read."""
        try:
            return scrape_snapshot(self.kind, self.url)
        except SourceError:
            return None

    @contextmanager
    def during(self) -> Iterator[list[RunEngineFigures]]:
        """Sample while the block runs; the yielded list holds the figures afterwards."""
        out: list[RunEngineFigures] = []
        samples: list[EngineSnapshot] = []
        errors: list[str] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(self.interval_s):
                try:
                    samples.append(scrape_snapshot(self.kind, self.url))
                except SourceError as e:
                    errors[:] = errors or [str(e)]

        before = self.snapshot()
        thread = threading.Thread(target=sample, name="slotune-metrics-watch", daemon=True)
        thread.start()
        try:
            yield out
        finally:
            stop.set()
            thread.join()
            after = self.snapshot()
            out.append(figures(before, samples + ([after] if after else []), after, errors))


def figures(
    before: EngineSnapshot | None,
    samples: list[EngineSnapshot],
    after: EngineSnapshot | None,
    errors: list[str] | None = None,
) -> RunEngineFigures:
    """Fold a run's samples and its first and last scrape into :class:`RunEngineFigures`."""

    def gauge(name: str) -> list[float]:
        return [s.gauges[name] for s in samples if name in s.gauges]

    kv = gauge("kv_usage")
    deltas: dict[str, float] = {}
    if before is not None and after is not None:
        for name in _DELTA_COUNTERS:
            # A labelled series appears at its first increment (SGLang's cached tokens at the
            # first prefix hit, a new finish reason): absent before the run, it was 0 then.
            if name in after.counters:
                deltas[name] = after.counters[name] - before.counters.get(name, 0.0)
    return RunEngineFigures(
        num_samples=len(samples),
        kv_usage_max=max(kv) if kv else None,
        kv_usage_mean=sum(kv) / len(kv) if kv else None,
        waiting_max=max(gauge("requests_waiting"), default=None),
        running_max=max(gauge("requests_running"), default=None),
        deltas=deltas,
        errors=tuple(errors or ()),
    )


def merge(runs: list[RunEngineFigures]) -> RunEngineFigures:
    """The figures of several runs of one trial taken together (peaks, summed deltas)."""
    if not runs:
        return RunEngineFigures()
    total = sum(r.num_samples for r in runs)

    def peak(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    means = [(r.kv_usage_mean, r.num_samples) for r in runs if r.kv_usage_mean is not None]
    weight = sum(n for _, n in means)
    deltas: dict[str, float] = {}
    for r in runs:
        for k, v in r.deltas.items():
            deltas[k] = deltas.get(k, 0.0) + v
    return RunEngineFigures(
        num_samples=total,
        kv_usage_max=peak([r.kv_usage_max for r in runs]),
        kv_usage_mean=sum(m * n for m, n in means) / weight if weight else None,
        waiting_max=peak([r.waiting_max for r in runs]),
        running_max=peak([r.running_max for r in runs]),
        deltas=deltas,
        errors=tuple(e for r in runs for e in r.errors)[:1],
    )
