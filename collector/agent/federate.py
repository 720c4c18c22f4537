"""An existing Prometheus as a source: ``--scrape prometheus=http://prom:9090``.

For fleets whose engines the agent does not reach, the agent reads what a Prometheus (or
Thanos / Mimir / VictoriaMetrics: the same endpoint) already scrapes from its ``/federate``
endpoint, with ``match[]`` selectors for the engine and DCGM series
(:data:`DEFAULT_MATCH`; give ``/federate?match[]=...`` in the URL to choose others). Each
series keeps its own ``job`` and ``instance``: every (job, instance) pair becomes one slotune
target named ``job/instance``, whose kind comes from its metric names (``vllm:``,
``sglang:``, ``trtllm_``, ``DCGM_FI_``) and whose families go through that kind's own source
mapping onto canonical names. Sample timestamps are ignored like on any scrape: the agent's
clock stamps what it read. Series of other exporters are left out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from urllib.parse import urlencode, urlsplit

from slotune.collector.agent.base import (
    Family,
    Fetcher,
    Response,
    Sample,
    Scrape,
    ScrapePart,
    SkippedLine,
    Source,
    SourceKind,
)
from slotune.collector.agent.budget import current_deadline, off_loop
from slotune.collector.agent.promsource import PromTextSource
from slotune.collector.agent.promtext import PromTextParser
from slotune.collector.agent.text_sources import TEXT_SOURCES

# A prefix is a metric name's start ([a-zA-Z_:][a-zA-Z0-9_:]*), so it needs no regex escape.
DEFAULT_MATCH = (
    '{__name__=~"'
    + "|".join(f"{k.federate_prefix}.+" for k in SourceKind if k.federate_prefix)
    + '"}',
)
_ID_LABELS = ("job", "instance")


def federate_url(url: str) -> str:
    """The URL with the default ``match[]`` selectors when it carries none."""
    if urlsplit(url).query:
        return url
    return f"{url}?{urlencode([('match[]', m) for m in DEFAULT_MATCH])}"


# (metric-name prefix, source class) of every kind a ``/federate`` body can carry
_FEDERATED = tuple(
    (kind.federate_prefix, cls) for kind, cls in TEXT_SOURCES.items() if kind.federate_prefix
)


def kind_of(families: Iterable[Family]) -> type[PromTextSource] | None:
    """The source class whose metric names a target's families carry."""
    for fam in families:
        for prefix, cls in _FEDERATED:
            if fam.name.startswith(prefix):
                return cls
    return None


class FederateSource(Source):
    """Reads many targets through one Prometheus ``/federate`` endpoint."""

    kind = SourceKind.PROMETHEUS

    def __init__(self, urls: Iterable[str] = ()) -> None:
        super().__init__(federate_url(u) for u in urls)
        self.parser = PromTextParser()
        # one source per upstream target, so each keeps its own memo of unchanged families
        self._sources: dict[str, PromTextSource] = {}
        self._lock = threading.Lock()  # see PromTextSource

    async def collect(self, fetch: Fetcher) -> Scrape:
        responses = [(url, await fetch.get(url)) for url in self.urls]
        return await off_loop(self.read, responses)

    def read(self, responses: list[tuple[str, Response]]) -> Scrape:
        """Parse and split the bodies of one scrape (blocking: runs in a worker thread)."""
        with self._lock:
            return self._read(responses, current_deadline())

    def _read(self, responses: list[tuple[str, Response]], deadline: float | None) -> Scrape:
        skipped: list[SkippedLine] = []
        groups: dict[tuple[str, str], dict[str, list[Sample]]] = {}
        types: dict[str, Family] = {}
        for url, response in responses:
            parsed = self.parser.parse(
                response.text, content_type=response.content_type, source=url, deadline=deadline
            )
            skipped.extend(parsed.skipped)
            for fam in parsed.families:
                types[fam.name] = fam
                for s in fam.samples:
                    labels = dict(s.labels)
                    key = (labels.pop("job", ""), labels.pop("instance", ""))
                    kept = tuple((k, v) for k, v in s.labels if k not in _ID_LABELS)
                    groups.setdefault(key, {}).setdefault(fam.name, []).append(
                        Sample(s.name, kept, s.value)
                    )
        parts = []
        for (job, instance), by_family in sorted(groups.items()):
            families = [
                Family(name, types[name].type, tuple(samples), types[name].help)
                for name, samples in by_family.items()
            ]
            cls = kind_of(families)
            if cls is None:
                continue
            target = f"{job}/{instance}" if job else instance
            source = self._sources.get(target)
            if source is None or type(source) is not cls:
                source = self._sources[target] = cls()
            parts.append(
                ScrapePart(
                    target=target,
                    kind=cls.kind,
                    labels={"job": job, "instance": instance},
                    scrape=source.from_families(families),
                )
            )
        return Scrape((), (), tuple(skipped), parts=tuple(parts))
