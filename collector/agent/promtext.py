"""Prometheus text and OpenMetrics parsing into :class:`~collector.agent.base.Family` records.

Prometheus text is parsed line by line (each line by :mod:`collector.agent.sampleline`, in
time linear in its length): every line that parses is kept, every other line is
reported as a :class:`~collector.agent.base.SkippedLine` (real material has them:
documentation excerpts with ``...`` lines, labels cut short with ``,...}``, odd values). Only
a body in which not a single sample parses is an error (``SourceError``). A
:class:`PromTextParser` remembers the name and labels of every series line it has seen, so
the next scrape of the same endpoint only converts values: an engine's exposition repeats
its series every time, and the agent parses twenty of them a second.
``prometheus_client``'s parser, which stops at the first bad line and is several times
slower, reads OpenMetrics bodies (by content type or a final ``# EOF``; when it refuses one,
the line parser takes over); the tests hold the line parser to agree with it.

Samples are then regrouped by family with the ``# TYPE`` lines: a name ending in ``_total``
is *not* taken as proof of a counter (``vllm:iteration_tokens_total`` is a histogram). Samples
without a type stay ``unknown``, except ``X_bucket{le=...}`` / ``X_sum`` / ``X_count`` groups,
which are histograms in every exporter we know. Sample timestamps are checked (a finite
number) and ignored: the agent's clock stamps every scrape. A parse given a deadline (the
scrape's, see :mod:`collector.agent.budget`) stops there with a ``SourceError``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)

from slotune.collector.agent.base import Family, Labels, MetricType, Sample, SkippedLine
from slotune.collector.agent.sampleline import NAME, NOT_A_SAMPLE, scan_sample_line
from slotune.collector.errors import SourceError

_COMMENT_RE = re.compile(rf"#\s*+(TYPE|HELP)\s++({NAME})(?:\s++(.*))?$")
_TYPES = {
    "counter": MetricType.COUNTER,
    "gauge": MetricType.GAUGE,
    "histogram": MetricType.HISTOGRAM,
    "summary": MetricType.SUMMARY,
    "untyped": MetricType.UNKNOWN,
    "unknown": MetricType.UNKNOWN,
    "info": MetricType.GAUGE,
    "stateset": MetricType.GAUGE,
}
_SUFFIXES = {
    MetricType.COUNTER: ("_total",),
    MetricType.HISTOGRAM: ("_bucket", "_sum", "_count"),
    MetricType.SUMMARY: ("_sum", "_count"),
    MetricType.GAUGE: ("_info",),
}
_MAX_REPORTED_LINE = 200
# Real series lines are a few hundred characters; longer ones are parsed but not remembered,
# so a target serving new long lines at each scrape cannot grow the caches without bound.
_MAX_CACHED_LINE = 1024
_LINES_PER_CLOCK_CHECK = 256
_NOT_A_VALUE: tuple[str, Labels] = ("", ())  # cached head of a ``_created`` line


@dataclass(frozen=True, slots=True)
class ParseResult:
    """Families parsed from one body, and the lines that were left out."""

    families: tuple[Family, ...]
    skipped: tuple[SkippedLine, ...] = ()


@dataclass(slots=True)
class _Flat:
    samples: dict[tuple[str, Labels], float]
    types: dict[str, MetricType]
    helps: dict[str, str]
    skipped: list[SkippedLine]


def is_openmetrics(text: str, content_type: str = "") -> bool:
    """Whether a body is OpenMetrics (by content type, or a final ``# EOF`` line)."""
    return "openmetrics" in content_type.lower() or text.rstrip().endswith("# EOF")


def parse_text(text: str, *, content_type: str = "", source: str = "response") -> ParseResult:
    """Parse a Prometheus text (0.0.4) or OpenMetrics body (see :meth:`PromTextParser.parse`)."""
    return PromTextParser().parse(text, content_type=content_type, source=source)


class PromTextParser:
    """A parser that remembers series lines between bodies (one per scraped endpoint)."""

    _MAX_CACHED = 100_000

    def __init__(self) -> None:
        self._heads: dict[str, tuple[str, Labels]] = {}
        self._comments: dict[str, tuple[str, str, str] | None] = {}
        self._types: dict[str, MetricType] = {}
        self._family_of: dict[str, tuple[str, MetricType]] = {}
        self._last_body: tuple[str, str] = ("", "")
        self._last_result: ParseResult | None = None
        self._last_families: dict[str, Family] = {}

    def parse(
        self,
        text: str,
        *,
        content_type: str = "",
        source: str = "response",
        deadline: float | None = None,
    ) -> ParseResult:
        """Parse a Prometheus text (0.0.4) or OpenMetrics body.

        Args:
            text: the body.
            content_type: the HTTP Content-Type, used to recognise OpenMetrics.
            source: where the body came from (a URL or file name), for error messages.
            deadline: a ``time.monotonic()`` instant past which parsing stops (the scrape's
                time budget); None parses to the end.

        Returns:
            The families and the skipped lines.

        Raises:
            SourceError: the body has lines but none of them is a metric sample, or the
                deadline passed.
        """
        # An idle engine serves the same body scrape after scrape: same body, same result.
        if self._last_result is not None and self._last_body == (text, content_type):
            return self._last_result
        clock = _Deadline(deadline, source)
        openmetrics = is_openmetrics(text, content_type)
        flat = _flat_from_client(text, clock) if openmetrics else None
        if flat is None:
            if len(self._heads) + len(self._comments) > self._MAX_CACHED:
                self._heads.clear()
                self._comments.clear()
            flat = _flat_line_by_line(text, self._heads, self._comments, openmetrics, clock)
        if not flat.samples and flat.skipped:
            first = flat.skipped[0]
            raise SourceError(
                f"no metric samples in {source}: line {first.line_no} ({first.text!r}) "
                f"{first.reason}; check that the URL serves Prometheus metrics text "
                "(for example http://host:8000/metrics)"
            )
        if flat.types != self._types:  # family assignments depend on the # TYPE lines
            self._types = flat.types
            self._family_of.clear()
        families = reuse_unchanged(_group(flat, self._family_of), self._last_families)
        self._last_families = {f.name: f for f in families}
        result = ParseResult(families, tuple(flat.skipped))
        self._last_body, self._last_result = (text, content_type), result
        return result


def reuse_unchanged(families: tuple[Family, ...], last: dict[str, Family]) -> tuple[Family, ...]:
    """The previous body's Family object wherever a family did not change.

    Later stages (canonical mapping, the encoder) recognise an unchanged family by identity
    and skip their per-sample work for it.
    """
    out = []
    for fam in families:
        prev = last.get(fam.name)
        out.append(prev if prev is not None and prev == fam else fam)
    return tuple(out)


class _Deadline:
    """Stops a parse that outlasts its scrape's time budget (checked every few lines)."""

    def __init__(self, deadline: float | None, source: str) -> None:
        self.deadline = deadline
        self.source = source

    def check(self, line_no: int) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise SourceError(
                f"parsing {self.source} outlasted the scrape timeout (stopped at line "
                f"{line_no}); the target serves an exposition too large or too slow to read: "
                "check it, or raise its scrape_timeout"
            )


def _flat_from_client(text: str, clock: _Deadline) -> _Flat | None:
    """Parse OpenMetrics with prometheus_client; None when it refuses the body."""
    flat = _Flat({}, {}, {}, [])
    try:
        for fam in openmetrics_families(text):  # type: ignore[no-untyped-call]
            clock.check(0)
            kind = _TYPES.get(fam.type, MetricType.UNKNOWN)
            if kind is not MetricType.UNKNOWN:
                flat.types[fam.name] = kind
                if kind is MetricType.GAUGE and fam.type == "info":
                    flat.types[fam.name + "_info"] = kind
            if fam.documentation:
                flat.helps[fam.name] = fam.documentation
            for s in fam.samples:
                _add(flat, s.name, tuple(sorted(s.labels.items())), float(s.value))
    except SourceError:
        raise
    except Exception:
        return None
    return flat


def _flat_line_by_line(
    text: str,
    heads: dict[str, tuple[str, Labels]],
    comments: dict[str, tuple[str, str, str] | None],
    openmetrics: bool,
    clock: _Deadline,
) -> _Flat:
    flat = _Flat({}, {}, {}, [])
    samples = flat.samples
    for line_no, raw_line in enumerate(text.splitlines(), start=1):
        if not line_no % _LINES_PER_CLOCK_CHECK:
            clock.check(line_no)
        line = raw_line.strip()
        if not line:
            continue
        if line[0] == "#":
            _comment(flat, line, comments)
            continue
        head, _, tail = line.rpartition(" ")
        known = heads.get(head)
        if known is not None:
            if known is _NOT_A_VALUE:
                continue
            try:
                samples[known] = float(tail)
                continue
            except ValueError:
                pass  # the slow path names the problem
        reason = _sample_line(flat, line, heads, openmetrics)
        if reason:
            flat.skipped.append(SkippedLine(line_no, line[:_MAX_REPORTED_LINE], reason))
    return flat


def _comment(flat: _Flat, line: str, comments: dict[str, tuple[str, str, str] | None]) -> None:
    if line in comments:
        parsed = comments[line]
    else:
        m = _COMMENT_RE.match(line)
        parsed = (m.group(1), m.group(2), (m.group(3) or "").strip()) if m else None
        if len(line) <= _MAX_CACHED_LINE:
            comments[line] = parsed
    if parsed is None:
        return
    keyword, name, rest = parsed
    if keyword == "TYPE":
        kind = _TYPES.get(rest.lower(), MetricType.UNKNOWN)
        if kind is not MetricType.UNKNOWN:
            flat.types[name] = kind
    else:
        flat.helps[name] = rest


def _sample_line(
    flat: _Flat, line: str, heads: dict[str, tuple[str, Labels]], openmetrics: bool
) -> str:
    """Add one sample line; return why it was skipped, or '' when it was added."""
    parts = scan_sample_line(line, openmetrics=openmetrics)
    if isinstance(parts, str):
        if parts == NOT_A_SAMPLE and line.strip(".") == "":
            return "is an elision ('...') from a documentation excerpt, not a sample"
        return parts
    try:
        value = float(parts.value)
    except ValueError:
        return f"has a value {parts.value[:40]!r} that is not a number"
    if parts.timestamp and not is_finite_number(parts.timestamp):
        return f"has a timestamp {parts.timestamp[:40]!r} that is not a finite number"
    name = parts.name
    is_value = not name.endswith("_created")  # creation timestamps are not values
    if not parts.timestamp and line[parts.value_at - 1] == " " and len(line) <= _MAX_CACHED_LINE:
        # what rpartition(" ") yields for this line next time: name and labels
        heads[line[: parts.value_at - 1]] = (name, parts.labels) if is_value else _NOT_A_VALUE
    if is_value:
        flat.samples[(name, parts.labels)] = value
    return ""


def is_finite_number(text: str) -> bool:
    """Whether ``text`` reads as a finite number (a timestamp must be one)."""
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _add(flat: _Flat, name: str, labels: Labels, value: float) -> None:
    if name.endswith("_created"):
        return  # creation timestamps, not values
    flat.samples[(name, labels)] = value


def _family_of(name: str, types: dict[str, MetricType]) -> tuple[str, MetricType] | None:
    if name in types:
        return name, types[name]
    for kind, suffixes in _SUFFIXES.items():
        for suffix in suffixes:
            base = name.removesuffix(suffix)
            if base != name and types.get(base) is kind:
                return base, kind
    return None


def _group(
    flat: _Flat, typed: dict[str, tuple[str, MetricType]] | None = None
) -> tuple[Family, ...]:
    """Samples grouped by family.

    ``typed`` caches name -> family decided by ``# TYPE`` lines (valid while they stay the
    same); families inferred from ``_bucket`` samples are decided per body.
    """
    typed = {} if typed is None else typed
    inferred: dict[str, tuple[str, MetricType]] = {}
    histogram_bases: set[str] | None = None
    grouped: dict[str, tuple[MetricType, list[Sample]]] = {}
    for (name, labels), value in flat.samples.items():
        found = typed.get(name) or inferred.get(name)
        if found is None:
            found = _family_of(name, flat.types)
            if found is not None:
                typed[name] = found
            else:
                if histogram_bases is None:
                    histogram_bases = _histogram_bases(flat)
                base = _untyped_histogram_base(name, histogram_bases)
                found = (base, MetricType.HISTOGRAM) if base else (name, MetricType.UNKNOWN)
                inferred[name] = found
        entry = grouped.get(found[0])
        if entry is None:
            entry = grouped[found[0]] = (found[1], [])
        entry[1].append(Sample(name, labels, value))
    return tuple(
        Family(name, kind, tuple(samples), flat.helps.get(name, ""))
        for name, (kind, samples) in grouped.items()
    )


def _histogram_bases(flat: _Flat) -> set[str]:
    return {
        name.removesuffix("_bucket")
        for (name, labels) in flat.samples
        if name.endswith("_bucket") and any(k == "le" for k, _ in labels)
    }


def _untyped_histogram_base(name: str, bases: set[str]) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(suffix)
        if base != name and base in bases:
            return base
    return ""


def finite_samples(families: Iterable[Family]) -> Iterable[tuple[Family, Sample]]:
    """Every sample with a value a database can hold (NaN is dropped)."""
    for fam in families:
        for s in fam.samples:
            if not math.isnan(s.value):
                yield fam, s
