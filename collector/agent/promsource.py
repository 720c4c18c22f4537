"""A source that reads Prometheus text from its URLs: the common part of the exporter sources."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import ClassVar

from slotune.collector.agent.base import Family, Fetcher, Response, Scrape, SkippedLine, Source
from slotune.collector.agent.budget import current_deadline, off_loop
from slotune.collector.agent.canonical import RequestOutcomes, Rule, apply_rules
from slotune.collector.agent.promtext import PromTextParser, reuse_unchanged
from slotune.collector.redact import redact_url


class PromTextSource(Source):
    """Fetch every URL, parse it, normalise labels, map onto canonical names.

    Fetching runs on the event loop; parsing and mapping (:meth:`read`) in a worker thread,
    within the scrape's deadline.

    Subclasses set ``rules`` and may override :meth:`clean` (sentinel values, missing
    types), :meth:`normalise` (label spelling of canonical series) and :meth:`derive`
    (canonical series computed from several raw ones).
    """

    rules: ClassVar[tuple[Rule, ...]] = ()
    # an engine's: how its requests ended, for the error-rate SLI and its Prometheus rules
    outcomes: ClassVar[RequestOutcomes | None] = None

    @classmethod
    def export_rules(cls) -> tuple[Rule, ...]:
        """The rules a Prometheus rule file may use for this kind (default: ``rules``)."""
        return cls.rules

    def __init__(self, urls: Iterable[str] = ()) -> None:
        super().__init__(urls)
        self.parsers = {url: PromTextParser() for url in self.urls}
        self._last_raw: tuple[Family, ...] = ()
        self._last_scrape: Scrape | None = None
        # raw family name -> (raw, cleaned, normalised) objects of the previous scrape
        self._prepared: dict[str, tuple[Family, Family, Family]] = {}
        # A scrape abandoned at its timeout may still be parsing when the next one starts:
        # the parsers' and mapping's memos are used by one thread at a time.
        self._lock = threading.Lock()

    async def collect(self, fetch: Fetcher) -> Scrape:
        responses = [(url, await fetch.get(url)) for url in self.urls]
        return await off_loop(self.read, responses)

    def read(self, responses: list[tuple[str, Response]]) -> Scrape:
        """Parse the bodies of one scrape and map them (blocking: runs in a worker thread).

        Raises:
            SourceError: a body without samples, or the scrape's deadline passed.
        """
        deadline = current_deadline()
        with self._lock:
            raw: list[Family] = []
            skipped: list[SkippedLine] = []
            for url, resp in responses:
                parsed = self.parsers[url].parse(
                    resp.text,
                    content_type=resp.content_type,
                    source=redact_url(url),
                    deadline=deadline,
                )
                raw.extend(parsed.families)
                skipped.extend(parsed.skipped)
            return self.from_families(raw, skipped)

    def from_families(self, raw: list[Family], skipped: list[SkippedLine] | None = None) -> Scrape:
        """Build the scrape from already parsed families (also used on files in tests).

        The mapping depends on the families alone, so when every family is the very object
        the previous scrape had (the parser reuses unchanged ones) so is the result.
        """
        skipped_t = tuple(skipped or ())
        last = self._last_scrape
        if (
            last is not None
            and last.skipped == skipped_t
            and len(raw) == len(self._last_raw)
            and all(a is b for a, b in zip(raw, self._last_raw, strict=True))
        ):
            return last
        prepared = [self._prepare(f) for f in raw]
        self._prepared = {p[0].name: p for p in prepared}
        cleaned = tuple(p[1] for p in prepared)
        families = tuple(p[2] for p in prepared)
        canonical = apply_rules(families, self.rules_for(families)) + self.derive(families)
        if last is not None:  # unchanged canonical families keep their identity too
            canonical = reuse_unchanged(canonical, {f.name: f for f in last.canonical})
        self._last_raw = tuple(raw)
        self._last_scrape = Scrape(cleaned, canonical, skipped_t)
        return self._last_scrape

    def _prepare(self, family: Family) -> tuple[Family, Family, Family]:
        """(raw, cleaned, normalised), the previous objects when the raw family is unchanged."""
        prev = self._prepared.get(family.name)
        if prev is not None and prev[0] is family:
            return prev
        cleaned = self.clean(family)
        return family, cleaned, self.normalise(cleaned)

    def rules_for(self, families: tuple[Family, ...]) -> tuple[Rule, ...]:
        """The rules for this exposition (default: ``rules``; versions may differ)."""
        return self.rules

    def clean(self, family: Family) -> Family:
        """Drop samples that are not measurements, fix missing types (default: as is)."""
        return family

    def normalise(self, family: Family) -> Family:
        """Label spelling for the canonical series; raw series keep theirs (default: as is)."""
        return family

    def derive(self, families: tuple[Family, ...]) -> tuple[Family, ...]:
        """Canonical families computed from several raw ones (default: none)."""
        return ()
