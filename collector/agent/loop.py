"""The agent's scrape loop: every target on its own schedule, none able to stop another.

- Each target runs in its own asyncio task: scrape within its ``scrape_timeout`` and
  ``body_size_limit`` (:mod:`collector.agent.budget`: fetching on the event loop, parsing
  and mapping in a worker thread, so a body that is slow to read fails its own target and
  holds back no other), stamp the samples with the *agent's* clock (the time the scrape
  started), queue them for the store, hand the scrape to the exporters, sleep until the
  next slot.
- ``up`` (1/0) and ``scrape_duration_seconds`` are stored per target on every attempt, like
  Prometheus does.
- A target that fails is retried with exponential backoff (interval × 2, × 4, ... capped
  at ``max_backoff_s``); its failure is logged once when it goes down and once when it comes
  back, never on every attempt. NVML without a driver is such a target.
- Counter and histogram resets (an engine restart) need nothing here: series stay
  cumulative; the store records each drop (``counter_reset``) so increases over any window
  are right, and the OTLP exporter starts a new cumulative period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Protocol

from slotune.collector.agent.base import Scrape, Source
from slotune.collector.agent.budget import scrape_budget
from slotune.collector.agent.encode import DEFAULT_HEARTBEAT_S, SampleEncoder
from slotune.collector.agent.fetch import HttpFetcher
from slotune.collector.agent.registry import make_source
from slotune.collector.agent.targets import TargetSpec
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.errors import SourceError
from slotune.collector.store import SampleIn

log = logging.getLogger(__name__)

DEFAULT_MAX_BACKOFF_S = 60.0
# What a scrape may run past its timeout before the loop gives up on it: the parser stops
# itself at the deadline with a clearer reason, this only catches what does not.
_GRACE_S = 0.5


class TargetHealth(StrEnum):
    """What the agent knows of a target."""

    UNKNOWN = "unknown"
    UP = "up"
    DOWN = "down"


class Exporter(Protocol):
    """Receives every scrape; pushes or serves it somewhere."""

    def update(self, target: TargetSpec, scrape: Scrape | None, ts: float) -> None:
        """The latest scrape of ``target`` (None when it failed)."""

    async def push(self) -> None:
        """Send what is new (no-op for pull exporters)."""

    def close(self) -> None:
        """Stop serving / flush."""


@dataclass(frozen=True, slots=True)
class ScrapeOutcome:
    """What one scrape of one target gave."""

    target: str
    is_up: bool
    num_samples: int
    num_skipped_lines: int
    duration_s: float
    error: str = ""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        return asdict(self)


class TargetRunner:
    """One target's source, health and backoff."""

    def __init__(
        self,
        spec: TargetSpec,
        source: Source,
        *,
        timeout_s: float,
        max_backoff_s: float = DEFAULT_MAX_BACKOFF_S,
    ) -> None:
        self.spec = spec
        self.source = source
        self.timeout_s = timeout_s
        self.max_backoff_s = max(max_backoff_s, spec.interval_s)
        self.health = TargetHealth.UNKNOWN
        self.num_failures = 0
        self._model_known = "model" in spec.labels or not spec.kind.is_engine

    def next_delay_s(self) -> float:
        """Seconds until the next attempt: the interval, or the backoff while down."""
        if self.health is not TargetHealth.DOWN:
            return self.spec.interval_s
        backoff_s = self.spec.interval_s * 2.0**self.num_failures
        return min(backoff_s, self.max_backoff_s)

    async def scrape(
        self, fetch: HttpFetcher, clock: Callable[[], float]
    ) -> tuple[ScrapeOutcome, Scrape | None, float]:
        """Collect once; never raises (a failure is an outcome with ``is_up`` False)."""
        ts = clock()
        started = time.perf_counter()
        scrape: Scrape | None = None
        error = ""
        try:
            with scrape_budget(self.timeout_s, self.spec.max_body_bytes):
                scrape = await asyncio.wait_for(
                    self.source.collect(fetch), self.timeout_s + _GRACE_S
                )
        except TimeoutError:
            error = (
                f"the scrape outlasted its scrape_timeout of {self.timeout_s:g} s; check the "
                "target's load and body size, or raise its scrape_timeout"
            )
        except SourceError as e:
            error = str(e)
        except Exception as e:
            log.exception("target %s: unexpected error while scraping", self.spec.name)
            error = f"{type(e).__name__}: {e}"
        duration = time.perf_counter() - started
        self._set_health(scrape is not None, error)
        if scrape is not None and not self._model_known:
            await self._discover_model(fetch)
        outcome = ScrapeOutcome(
            self.spec.name,
            scrape is not None,
            scrape.num_samples if scrape else 0,
            len(scrape.skipped) if scrape else 0,
            duration,
            error,
        )
        return outcome, scrape, ts

    def _set_health(self, is_up: bool, error: str) -> None:
        if is_up:
            if self.health is TargetHealth.DOWN:
                log.info("target %s is up again", self.spec.name)
            self.health, self.num_failures = TargetHealth.UP, 0
            return
        if self.health is not TargetHealth.DOWN:
            log.warning("target %s is down: %s", self.spec.name, error)
        self.health = TargetHealth.DOWN
        self.num_failures += 1

    async def _discover_model(self, fetch: HttpFetcher) -> None:
        model = await fetch.discover_model(self.spec.base_url)
        if model:
            self.spec = self.spec.with_labels({"model": model})
            self._model_known = True


def _scrape_timeout_s(target: TargetSpec, override_s: float | None) -> float:
    """Like Prometheus, a target's scrape may not outlast its interval."""
    if override_s is not None:
        return override_s
    return min(target.scrape_timeout_s, target.interval_s)


# One labels object for every health sample: the store recognises a series by the identity
# of its labels object before it sorts labels, so a fresh {} per sample would cost a cache
# entry per scrape.
_NO_LABELS: dict[str, str] = {}


def health_samples(outcome: ScrapeOutcome, ts: float) -> list[SampleIn]:
    """``up`` and ``scrape_duration_seconds`` of one attempt."""
    return [
        SampleIn(outcome.target, "up", "gauge", _NO_LABELS, ts, 1.0 if outcome.is_up else 0.0),
        SampleIn(
            outcome.target, "scrape_duration_seconds", "gauge", _NO_LABELS, ts, outcome.duration_s
        ),
    ]


class Agent:
    """Scrapes targets into the store and the exporters.

    Args:
        targets: what to scrape.
        writer: the store writer.
        exporters: Prometheus / OTLP exporters.
        timeout_s: when given, the scrape timeout of every target instead of its own, as
            given (tests give loaded machines slack with it); None: each target's
            ``scrape_timeout_s``, capped at its interval.
        clock: the agent's clock (epoch seconds).
        heartbeat_s: longest time an unchanged cumulative series goes unwritten (see
            :mod:`collector.agent.encode`); 0 writes every sample.
    """

    def __init__(
        self,
        targets: Sequence[TargetSpec],
        writer: StoreWriter,
        exporters: Sequence[Exporter] = (),
        *,
        timeout_s: float | None = None,
        clock: Callable[[], float] = time.time,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
    ) -> None:
        self.runners = [
            TargetRunner(t, make_source(t), timeout_s=_scrape_timeout_s(t, timeout_s))
            for t in targets
        ]
        self.writer = writer
        self.exporters = list(exporters)
        self.clock = clock
        # requests outside a scrape (model discovery) and the wait for scrapes at shutdown
        self.timeout_s = max((r.timeout_s for r in self.runners), default=5.0)
        self.encoder = SampleEncoder(heartbeat_s)
        self._part_targets: set[str] = set()
        for r in self.runners:
            writer.register(r.spec)

    async def scrape_all_once(self) -> list[ScrapeOutcome]:
        """Scrape every target once, concurrently; write and export; return the outcomes."""
        async with HttpFetcher(self.timeout_s) as fetch:
            outcomes = await asyncio.gather(*(self._scrape(r, fetch) for r in self.runners))
        await asyncio.to_thread(self.writer.flush_now)
        for exp in self.exporters:
            await exp.push()
        return list(outcomes)

    async def run(self, *, duration_s: float | None = None) -> None:
        """Scrape until cancelled (or for ``duration_s``), then flush.

        Stopping lets scrapes in flight finish (within the scrape timeout), so what a
        target answered is stored; then the writer flushes its queue.
        """
        stop = asyncio.Event()
        async with HttpFetcher(self.timeout_s) as fetch:
            scrapers = [asyncio.create_task(self._run_target(r, fetch, stop)) for r in self.runners]
            helpers = [asyncio.create_task(self.writer.run())]
            helpers.extend(asyncio.create_task(self._push_loop(e)) for e in self.exporters)
            try:
                if duration_s is None:
                    # wait, not gather: a cancelled gather waits for its children, and a child
                    # that misses the cancel (wait_for's race in 3.11) would keep it forever;
                    # here the cancel reaches this frame and ``stop`` ends every loop.
                    if scrapers:
                        await asyncio.wait(scrapers, return_when=asyncio.FIRST_EXCEPTION)
                else:
                    await asyncio.sleep(duration_s)
            finally:
                stop.set()
                await asyncio.wait(scrapers, timeout=self.timeout_s + _GRACE_S + 1.0)
                for t in (*scrapers, *helpers):
                    t.cancel()
                for t in (*scrapers, *helpers):
                    with contextlib.suppress(asyncio.CancelledError):
                        await t

    def close(self) -> None:
        """Release sources, exporters and the store connection."""
        for r in self.runners:
            r.source.close()
        for exp in self.exporters:
            exp.close()
        self.writer.close()

    async def _scrape(self, runner: TargetRunner, fetch: HttpFetcher) -> ScrapeOutcome:
        before = runner.spec
        outcome, scrape, ts = await runner.scrape(fetch, self.clock)
        if runner.spec is not before:
            self.writer.register(runner.spec)
        samples = self.encoder.encode(runner.spec.name, scrape, ts) if scrape else []
        for part in scrape.parts if scrape else ():  # targets read through a federation
            if part.target not in self._part_targets:
                self._part_targets.add(part.target)
                self.writer.register(TargetSpec(part.target, part.kind, "", (), part.labels))
            samples += self.encoder.encode(part.target, part.scrape, ts)
        self.writer.put(samples + health_samples(outcome, ts))
        for exp in self.exporters:
            exp.update(runner.spec, scrape, ts)
        return outcome

    async def _run_target(
        self, runner: TargetRunner, fetch: HttpFetcher, stop: asyncio.Event
    ) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while not stop.is_set():
            await self._scrape(runner, fetch)
            due = max(due + runner.next_delay_s(), loop.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), due - loop.time())

    async def _push_loop(self, exporter: Exporter) -> None:
        interval = min((r.spec.interval_s for r in self.runners), default=5.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await exporter.push()
            except Exception:
                log.exception("exporter push failed")
