"""Batched store writes that survive store outages through the :mod:`spool`.

Scrapes put their samples on an in-memory queue; one task takes up to ``batch_max`` samples
(what arrived within ``flush_interval_s``, or at once when a backlog is waiting) and writes
them in a worker thread. While the
store is unreachable every batch goes to the spool, and while the spool holds anything new
batches queue behind it, so samples reach the store in the order they were scraped. When a
write succeeds again the spool is replayed first.

A store that *refuses* a batch (a value too long for a column, a constraint: told apart from
an outage by the error's code) is not waited for: the batch is split by target, each
target's part written on its own, and the parts still refused are quarantined in the spool's
``rejected/`` file, counted, and the writer moves on. One target's bad data never holds back
another's.

The in-memory backlog is bounded (``max_queued`` samples): a store that stays reachable but
slower than the scrapes would otherwise grow the agent without limit. Past the bound the
oldest queued batches are dropped, as the spool drops its oldest segments, counted and
logged (at most once a minute).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import TargetSpec
from slotune.collector.errors import ConfigError, StoreError, StoreRejected
from slotune.collector.redact import redact_url
from slotune.collector.store import SampleIn, Store, open_store, register_target, write_samples

log = logging.getLogger(__name__)

_DROP_LOG_INTERVAL_S = 60.0


@dataclass(frozen=True, slots=True)
class WriterStats:
    """Counts since the writer started."""

    num_written: int
    num_spooled: int
    num_replayed_batches: int
    num_dropped: int
    num_rejected: int
    is_store_up: bool


class StoreWriter:
    """Writes sample batches to the store, spooling while it is away.

    Args:
        db_url: the store URL (None: the default SQLite file).
        spool: where batches wait during outages.
        batch_max: most samples per write.
        flush_interval_s: longest time a sample waits in memory before a write.
        max_queued: most samples held in memory waiting for a write (oldest dropped beyond).
    """

    def __init__(
        self,
        db_url: str | None,
        spool: Spool,
        *,
        batch_max: int = 20_000,
        flush_interval_s: float = 1.0,
        max_queued: int = 200_000,
    ) -> None:
        if max_queued < batch_max:
            raise ConfigError(
                f"max_queued ({max_queued}) must be at least batch_max "
                f"({batch_max}): a write takes up to batch_max queued samples"
            )
        self.db_url = db_url
        self.spool = spool
        self.batch_max = batch_max
        self.flush_interval_s = flush_interval_s
        self.max_queued = max_queued
        self._queue: deque[list[SampleIn]] = deque()
        self._num_queued = 0
        self._arrived = asyncio.Event()
        self._dropped = 0
        self._dropped_logged_at = -_DROP_LOG_INTERVAL_S
        self._store: Store | None = None
        self._targets: dict[str, TargetSpec] = {}
        self._registered: set[str] = set()
        self._is_up = True
        self._written = self._spooled = self._replayed = 0

    def put(self, samples: list[SampleIn]) -> None:
        """Queue samples for the next write (never blocks; drops the oldest past the bound)."""
        if not samples:
            return
        self._queue.append(samples)
        self._num_queued += len(samples)
        self._arrived.set()
        while self._num_queued > self.max_queued and len(self._queue) > 1:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        oldest = self._queue.popleft()
        self._num_queued -= len(oldest)
        self._dropped += len(oldest)
        now = time.monotonic()
        if now - self._dropped_logged_at >= _DROP_LOG_INTERVAL_S:
            self._dropped_logged_at = now
            log.warning(
                "the store writes slower than the targets are scraped: %d queued "
                "samples dropped so far (oldest first; at most %d are held)",
                self._dropped,
                self.max_queued,
            )

    def register(self, target: TargetSpec) -> None:
        """Register (or update) a target in the store with the next write."""
        self._targets[target.name] = target
        self._registered.discard(target.name)

    async def run(self) -> None:
        """Write batches until cancelled; cancellation writes what is still held."""
        held: list[SampleIn] = []
        inflight: asyncio.Future[None] | None = None
        try:
            while True:
                await self._arrived.wait()
                if self._num_queued < self.batch_max:  # no backlog: let scrapes gather
                    await asyncio.sleep(self.flush_interval_s)
                held = self._drain(self.batch_max)
                inflight = asyncio.ensure_future(asyncio.to_thread(self.write_now, held))
                held = []
                await asyncio.shield(inflight)
                inflight = None
        except asyncio.CancelledError:
            if inflight is not None:
                await inflight  # a write in a thread cannot be interrupted: let it finish
            held.extend(self._drain())
            await asyncio.to_thread(self.write_now, held)
            raise

    def _drain(self, limit: int | None = None) -> list[SampleIn]:
        out: list[SampleIn] = []
        while self._queue and (limit is None or len(out) < limit):
            batch = self._queue.popleft()
            self._num_queued -= len(batch)
            out.extend(batch)
        if not self._queue:
            self._arrived.clear()
        return out

    def flush_now(self) -> None:
        """Write everything queued (blocking)."""
        self.write_now(self._drain())

    def write_now(self, batch: Sequence[SampleIn]) -> None:
        """Write one batch (blocking): replay the spool first, spool the batch on failure."""
        try:
            store = self._open()
            self._register_targets(store)
            if not self.spool.is_empty():
                replayed = self.spool.replay(lambda b: self._write(store, b))
                self._replayed += replayed
                log.info("store reachable again: replayed %d spooled batches", replayed)
            self._write(store, batch)
            if not self._is_up:
                log.info("store %s is back", store.url)
            self._is_up = True
        except StoreError as e:
            self.hold(batch, f"store unavailable: {e}")
            self._drop_store()
        except Exception as e:
            # Anything else (a disk error reading the spool, a bug) must not end the writer
            # task, after which every later batch would wait in memory: the batch is set
            # aside with the error and the next write starts afresh.
            log.exception("unexpected error writing %d samples", len(batch))
            self.spool.quarantine(batch, f"unexpected error: {type(e).__name__}: {e}")
            self._drop_store()

    def hold(self, batch: Sequence[SampleIn], why: str) -> None:
        """Spool a batch its destination could not take now (said once per outage)."""
        try:
            self.spool.append(batch)
        except OSError as disk:
            log.error("cannot spool %d samples to %s: %s", len(batch), self.spool.directory, disk)
            self._dropped += len(batch)
        else:
            self._spooled += len(batch)
        if self._is_up:
            log.warning("%s; spooling to %s", why, self.spool.directory)
        self._is_up = False

    def _write(self, store: Store, batch: Sequence[SampleIn]) -> None:
        if not batch:
            return
        try:
            self._written += write_samples(store, batch)
            return
        except (StoreRejected, ConfigError) as e:
            # The batch itself is refused (not an outage): retrying cannot help, and
            # holding it would stop every later write.
            refused = e
        by_target: dict[str, list[SampleIn]] = {}
        for s in batch:
            by_target.setdefault(s.target, []).append(s)
        if len(by_target) == 1:
            self.spool.quarantine(batch, f"target {batch[0].target}: {refused}")
            return
        for target, part in by_target.items():
            try:
                self._written += write_samples(store, part)
            except (StoreRejected, ConfigError) as e:
                self.spool.quarantine(part, f"target {target}: {e}")

    def _open(self) -> Store:
        if self._store is None:
            self._store = open_store(self.db_url)
        return self._store

    def _drop_store(self) -> None:
        if self._store is not None:
            try:
                self._store.dispose()
            finally:
                self._store = None
                self._registered.clear()

    def _register_targets(self, store: Store) -> None:
        for name, t in self._targets.items():
            if name not in self._registered:
                try:
                    register_target(store, name, t.kind.value, redact_url(t.url), dict(t.labels))
                except StoreRejected as e:
                    # Its samples still register it (by name only) as they are written.
                    log.error("target %s: the store refused its description: %s", name, e)
                self._registered.add(name)

    def stats(self) -> WriterStats:
        """Counts since start."""
        return WriterStats(
            self._written,
            self._spooled,
            self._replayed,
            self._dropped,
            self.spool.stats().num_rejected_samples,
            self._is_up,
        )

    def close(self) -> None:
        """Release the store's connections."""
        if self._store is not None:
            self._store.dispose()
            self._store = None
