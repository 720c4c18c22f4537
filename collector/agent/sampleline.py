"""One sample line of Prometheus text (0.0.4) or OpenMetrics, read in linear time.

A line is ``name[{labels}] value [timestamp]``, with an exemplar
(`` # {labels} value [timestamp]``) after it in OpenMetrics. The line is read left to right,
each part by an expression that cannot backtrack (possessive quantifiers, disjoint
alternatives), so a line costs time in proportion to its length whatever it holds: a target
cannot stall the agent with runs of spaces or quotes, as it could a single regular expression
for the whole line. The text is not judged beyond its shape: values go through ``float``
(``NaN``, ``+Inf``), label escapes other than ``\\\\``, ``\\"`` and ``\\n`` stay as written,
as Prometheus reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slotune.collector.agent.base import Labels

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_NAME_RE = re.compile(NAME)
_LABEL_RE = re.compile(r'\s*+([a-zA-Z_][a-zA-Z0-9_]*+)\s*+=\s*+"((?:[^"\\]|\\.)*+)"\s*+')
_TOKEN_RE = re.compile(r"\s++(\S++)")
_SPACES_RE = re.compile(r"\s*+")
_ESCAPE_RE = re.compile(r"\\[\\\"n]")
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

NOT_A_SAMPLE = "is not '<name>{labels} <value>'"


@dataclass(frozen=True, slots=True)
class SampleLine:
    """The parts of one sample line.

    Attributes:
        name: the sample name (``..._bucket``, ``..._total``).
        labels: sorted label pairs, escapes resolved (the last of repeated names wins).
        value: the value as written (``float`` reads it).
        timestamp: the timestamp as written, "" when there is none.
        value_at: where the value starts in the line.
        timestamp_at: where the timestamp starts, -1 when there is none.
    """

    name: str
    labels: Labels
    value: str
    timestamp: str
    value_at: int
    timestamp_at: int


def scan_sample_line(line: str, *, openmetrics: bool = False) -> SampleLine | str:
    """Split a stripped sample line into its parts.

    Args:
        line: one line without surrounding whitespace, not a ``#`` comment.
        openmetrics: accept an exemplar after the value (OpenMetrics); it is checked for
            shape and left out.

    Returns:
        The parts, or why the line is not a sample (a reason that completes "line N ...").
    """
    name_m = _NAME_RE.match(line)
    if name_m is None:
        return NOT_A_SAMPLE
    pos = name_m.end()
    labels: Labels = ()
    brace_at = _skip_spaces(line, pos)
    if line[brace_at : brace_at + 1] == "{":
        scanned = _scan_labels(line, brace_at + 1)
        if scanned is None:
            return "has malformed labels"
        labels, pos = scanned
    value_m = _TOKEN_RE.match(line, pos)
    if value_m is None:
        return NOT_A_SAMPLE
    timestamp, timestamp_at = "", -1
    pos = value_m.end()
    next_m = _TOKEN_RE.match(line, pos)
    if next_m is not None and next_m.group(1) != "#":
        timestamp, timestamp_at = next_m.group(1), next_m.start(1)
        pos = next_m.end()
        next_m = _TOKEN_RE.match(line, pos)
    if next_m is not None:
        if not (openmetrics and next_m.group(1) == "#"):
            return NOT_A_SAMPLE
        if not _is_exemplar(line, next_m.end()):
            return "has a malformed exemplar (write '# {labels} value [timestamp]')"
    return SampleLine(
        name_m.group(), labels, value_m.group(1), timestamp, value_m.start(1), timestamp_at
    )


def _scan_labels(line: str, pos: int) -> tuple[Labels, int] | None:
    """The labels from just after ``{``, and the position after the closing ``}``."""
    pairs: dict[str, str] = {}
    while True:
        pos = _skip_spaces(line, pos)
        if pos < len(line) and line[pos] == "}":
            return tuple(sorted(pairs.items())), pos + 1
        m = _LABEL_RE.match(line, pos)
        if m is None:
            return None
        value = m.group(2)
        pairs[m.group(1)] = _ESCAPE_RE.sub(lambda e: _ESCAPES[e.group(0)], value)
        pos = m.end()
        if pos < len(line) and line[pos] == ",":
            pos += 1
        elif not (pos < len(line) and line[pos] == "}"):
            return None


def _is_exemplar(line: str, pos: int) -> bool:
    """Whether ``{labels} value [timestamp]`` follows ``#`` at ``pos``."""
    pos = _skip_spaces(line, pos)
    scanned = _scan_labels(line, pos + 1) if line[pos : pos + 1] == "{" else None
    if scanned is None:
        return False
    rest = line[scanned[1] :]
    tokens = rest.split()
    if not rest[:1].isspace() or not 1 <= len(tokens) <= 2:
        return False
    try:
        for token in tokens:
            float(token)
    except ValueError:
        return False
    return True


def _skip_spaces(line: str, pos: int) -> int:
    m = _SPACES_RE.match(line, pos)
    return m.end() if m else pos
