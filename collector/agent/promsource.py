"""A source that reads Prometheus text from its URLs: the common part of the exporter sources."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from collector.agent.base import Family, Fetcher, Scrape, SkippedLine, Source
from collector.agent.canonical import Rule, apply_rules
from collector.agent.promtext import PromTextParser


class PromTextSource(Source):
    """Fetch every URL, parse it, normalise labels, map onto canonical names.

    Subclasses set ``rules`` and may override :meth:`clean` (sentinel values, missing
    types), :meth:`normalise` (label spelling of canonical series) and :meth:`derive`
    (canonical series computed from several raw ones).
    """

    rules: ClassVar[tuple[Rule, ...]] = ()

    def __init__(self, urls: Iterable[str] = ()) -> None:
        super().__init__(urls)
        self.parsers = {url: PromTextParser() for url in self.urls}

    async def collect(self, fetch: Fetcher) -> Scrape:
        raw: list[Family] = []
        skipped: list[SkippedLine] = []
        for url in self.urls:
            resp = await fetch.get(url)
            parsed = self.parsers[url].parse(resp.text, content_type=resp.content_type,
                                             source=url)
            raw.extend(parsed.families)
            skipped.extend(parsed.skipped)
        return self.from_families(raw, skipped)

    def from_families(self, raw: list[Family], skipped: list[SkippedLine] | None = None) -> Scrape:
        """Build the scrape from already parsed families (also used on files in tests)."""
        cleaned = tuple(self.clean(f) for f in raw)
        families = tuple(self.normalise(f) for f in cleaned)
        canonical = apply_rules(families, self.rules_for(families)) + self.derive(families)
        return Scrape(cleaned, canonical, tuple(skipped or ()))

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
