"""The engines' own metric names per canonical metric, read from the source registry's rule
tables (``collector.agent.vllm`` ...), so PromQL reads the series the agent would map.

SGLang's names are matched in both spellings: ``sglang:`` (its exposition) and ``sglang_``
(what some Prometheus-compatible pipelines, e.g. OpenTelemetry's, turn the colon into).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from slotune.collector.agent.canonical import RequestOutcomes
from slotune.collector.agent.promsource import PromTextSource
from slotune.collector.agent.registry import SOURCES

_RESPELLED = (("sglang:", "sglang_"),)


@dataclass(frozen=True, slots=True)
class RawName:
    """An engine's own name for a canonical metric.

    Attributes:
        name: the raw sample name (counters, gauges) or family name (histograms).
        scale: factor from its unit to the canonical one (applies to ``le`` too).
        kind: the source kind that exports it; names of one kind are alternatives (old and
            new releases, spellings), names of different kinds add up.
    """

    name: str
    scale: float = 1.0
    kind: str = ""


def spellings(name: str) -> tuple[str, ...]:
    """A name (or name prefix) in every spelling it may reach Prometheus in."""
    return (name, *(alt + name[len(p) :] for p, alt in _RESPELLED if name.startswith(p)))


def _sources() -> list[type[PromTextSource]]:
    return [c for c in SOURCES.values() if issubclass(c, PromTextSource)]


@cache
def raw_names(canonical: str) -> tuple[RawName, ...]:
    """Every engine's and exporter's name for ``canonical`` (``ttft``, ``kv_usage`` ...)."""
    seen: dict[str, RawName] = {}
    for cls in _sources():
        for rule in cls.export_rules():
            if rule.target == canonical:
                for name in spellings(rule.source):
                    seen.setdefault(name, RawName(name, rule.scale, cls.kind.value))
    return tuple(seen.values())


@cache
def outcome_counters() -> tuple[RequestOutcomes, ...]:
    """How every engine counts its finished (and, apart, failed) requests, in both spellings."""
    out: list[RequestOutcomes] = []
    for cls in _sources():
        if cls.outcomes is None:
            continue
        finished = spellings(cls.outcomes.finished)
        failed = spellings(cls.outcomes.failed) if cls.outcomes.failed else ("",) * len(finished)
        out.extend(RequestOutcomes(f, x) for f, x in zip(finished, failed, strict=True))
    return tuple(out)
