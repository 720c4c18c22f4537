"""The contract every metric source follows, and the records they produce.

A source reads one endpoint (an engine's ``/metrics``, a DCGM exporter, the local NVML
library) and returns a :class:`Scrape`: the *raw* families, named and labelled exactly as the
endpoint wrote them, and the *canonical* families (``ttft``, ``kv_usage``, ``vram_used`` ...,
see :mod:`collector.agent.canonical`) mapped from them. Both are stored; dashboards and the
summary read the canonical ones, the raw ones stay for anything the mapping does not cover.

Contract for implementations (one file each: ``vllm.py``, ``sglang.py``, ``trtllm.py``,
``dcgm.py``, ``nvml.py``, ``federate.py``). Adding a source is its file, its kind in
:mod:`collector.vocabulary` (a member and its traits: engine or GPU, default paths, federate
prefix) and one line in :data:`collector.agent.registry.SOURCES` (a Prometheus text
endpoint's in :data:`collector.agent.text_sources.TEXT_SOURCES`); the suite in
``tests/collector/agent/test_source_contract.py`` then runs on it:

- ``collect`` never blocks the event loop (blocking libraries, parsing and mapping run in a
  worker thread through :func:`~collector.agent.budget.off_loop`, within the scrape's
  deadline) and raises only :class:`~collector.errors.SourceError` for an unreachable endpoint or a body that
  cannot be used; the message names the URL and what to check.
- Values are what the endpoint reports *now*; timestamps come from the agent, never the
  target, so the agent stamps the scrape after ``collect`` returns.
- A source may keep state between scrapes (TensorRT-LLM's ``/metrics`` drains a queue, so its
  source accumulates what every drained element contributed); state lives in the instance,
  one instance per target. Instances are not shared between threads.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple, Protocol

from slotune.collector.agent.targets import TargetSpec
from slotune.collector.series import MetricType
from slotune.collector.vocabulary import SourceKind

# re-exported from their one home: collector.series (shared with the store) and
# collector.vocabulary (shared with every layer)
__all__ = ["MetricType", "SourceKind"]

Labels = tuple[tuple[str, str], ...]


def make_labels(mapping: Mapping[str, str]) -> Labels:
    """Labels as a sorted tuple of pairs, so equal label sets compare and hash equal."""
    return tuple(sorted((str(k), str(v)) for k, v in mapping.items()))


class Sample(NamedTuple):
    """One exposed value: full sample name (``..._bucket``, ``..._total``), labels, value.

    A NamedTuple (like prometheus_client's ``Sample``): an exposition has hundreds of them
    per scrape and tuples are the cheapest immutable record to build.
    """

    name: str
    labels: Labels
    value: float

    def label(self, key: str, default: str = "") -> str:
        """The value of one label, or ``default``."""
        for k, v in self.labels:
            if k == key:
                return v
        return default


@dataclass(frozen=True, slots=True)
class Family:
    """A metric family: its base name, type and samples."""

    name: str
    type: MetricType
    samples: tuple[Sample, ...]
    help: str = ""


@dataclass(frozen=True, slots=True)
class SkippedLine:
    """A line of an exposition that could not be parsed and was left out."""

    line_no: int
    text: str
    reason: str


@dataclass(frozen=True, slots=True)
class Scrape:
    """What one collection of one target produced.

    ``parts``: scrapes of other targets read through this one (a Prometheus' ``/federate``),
    stored under their own target names.
    """

    raw: tuple[Family, ...]
    canonical: tuple[Family, ...]
    skipped: tuple[SkippedLine, ...] = field(default=())
    parts: tuple[ScrapePart, ...] = field(default=())

    @property
    def num_samples(self) -> int:
        """Raw plus canonical samples (of the parts too)."""
        own = sum(len(f.samples) for f in (*self.raw, *self.canonical))
        return own + sum(p.scrape.num_samples for p in self.parts)


@dataclass(frozen=True, slots=True)
class ScrapePart:
    """Another target's scrape, read through a federating source."""

    target: str
    kind: SourceKind
    labels: Mapping[str, str]
    scrape: Scrape


@dataclass(frozen=True, slots=True)
class Response:
    """An HTTP response body with its content type."""

    text: str
    content_type: str = ""


class Fetcher(Protocol):
    """Fetches one URL; raises SourceError when the target cannot be read."""

    async def get(self, url: str) -> Response: ...


class Source(ABC):
    """A metric source bound to one target's URLs.

    Attributes:
        kind: the target kind this class reads (its default paths are the kind's).
    """

    kind: ClassVar[SourceKind]

    def __init__(self, urls: Iterable[str] = ()) -> None:
        self.urls = tuple(urls)

    @classmethod
    def for_target(cls, target: TargetSpec) -> Source:
        """A fresh source reading ``target`` (one instance per target)."""
        return cls(target.metrics_urls)

    @abstractmethod
    async def collect(self, fetch: Fetcher) -> Scrape:
        """Read the target once.

        Args:
            fetch: the HTTP getter to use (ignored by sources that read no URL).

        Returns:
            The raw and canonical families read now.

        Raises:
            SourceError: the target is unreachable or returned nothing usable.
        """

    def close(self) -> None:  # noqa: B027 - optional hook, most sources hold nothing
        """Release what the source holds (library handles); called once at shutdown."""
