"""Importing a past incident: a metrics file with a timestamp on every sample, into the store.

Two formats, told apart as Prometheus tells them: a file that ends with ``# EOF`` is
OpenMetrics (what ``promtool tsdb create-blocks-from openmetrics`` reads), whose timestamps
are seconds since the epoch; any other file is Prometheus text (0.0.4), whose timestamps are
whole milliseconds since the epoch. Every timestamp must be a time between 1990 and 2200 in
its format's unit, so a file written in the other unit is refused rather than stored decades
away. Each timestamp becomes one scrape of the target: the same source as the agent's
(``--kind``) maps the raw families onto canonical names, so the evaluator and the dashboard
read the import exactly like live data. The whole file is checked before anything is stored,
and stored in one transaction.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from slotune.collector.agent.base import Family, Labels, SourceKind
from slotune.collector.agent.encode import SampleEncoder
from slotune.collector.agent.promsource import PromTextSource
from slotune.collector.agent.promtext import is_finite_number, parse_text
from slotune.collector.agent.registry import SOURCES
from slotune.collector.agent.sampleline import scan_sample_line
from slotune.collector.agent.targets import MAX_TARGET_NAME_CHARS
from slotune.collector.errors import ConfigError, SourceError
from slotune.collector.store import SampleIn, Store, list_targets, register_target, write_samples
from slotune.collector.textfile import read_text

# the kinds whose source maps Prometheus text, so a history file of theirs can be imported
IMPORT_KINDS = tuple(k.value for k, cls in SOURCES.items() if issubclass(cls, PromTextSource))
# the times a real incident can have, in seconds since the epoch: 1990-01-01 to 2200-01-01
_EARLIEST_S = 631_152_000.0
_LATEST_S = 7_258_118_400.0
_SECONDS_PER_YEAR = 31_556_952  # the Gregorian mean


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import stored: samples (raw and canonical), scrapes and their time span."""

    target: str
    num_samples: int
    num_scrapes: int
    first_ts: float
    last_ts: float

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "samples": self.num_samples,
            "scrapes": self.num_scrapes,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
        }


def split_by_timestamp(text: str, source: str) -> dict[float, str]:
    """One exposition body per timestamp (``# TYPE`` / ``# HELP`` lines in each), after
    checking that every sample has a timestamp, increasing per series.

    Returns:
        Bodies keyed by timestamp in seconds since the epoch, in time order.

    Raises:
        ConfigError: naming ``source:line`` and the fix.
    """
    openmetrics = text.rstrip().splitlines()[-1:] == ["# EOF"]
    headers: list[str] = []
    bodies: dict[float, list[str]] = defaultdict(list)
    last: dict[tuple[str, Labels], tuple[float, str]] = {}  # seconds, as written
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line == "# EOF":
            continue
        if line.startswith("#"):
            headers.append(line)
            continue
        parts = scan_sample_line(line, openmetrics=openmetrics)
        if isinstance(parts, str):
            raise ConfigError(f"{source}:{number}: not a sample line ({parts}): {line[:120]!r}")
        if not parts.timestamp:
            raise ConfigError(
                f"{source}:{number}: sample without a timestamp; history import needs one on "
                f"every sample ({_UNIT[openmetrics]} since the epoch, after the value)"
            )
        ts = _seconds(parts.timestamp, openmetrics, f"{source}:{number}")
        key = (parts.name, parts.labels)
        prev = last.get(key)
        if prev is not None and ts <= prev[0]:
            what = "a duplicate" if ts == prev[0] else "an out-of-order"
            raise ConfigError(
                f"{source}:{number}: {what} timestamp {parts.timestamp} for "
                f"{line[: parts.value_at].rstrip()[:120]} (previous {prev[1]}); each series' "
                "samples must have increasing timestamps"
            )
        last[key] = (ts, parts.timestamp)
        bodies[ts].append(line[: parts.timestamp_at].rstrip())
    return {ts: "\n".join([*headers, *lines]) + "\n" for ts, lines in sorted(bodies.items())}


_UNIT = {True: "seconds", False: "milliseconds"}
_OTHER_FORMAT = {
    True: "or drop the final '# EOF' line to read the file as Prometheus text (milliseconds)",
    False: "or end the file with a '# EOF' line to read it as OpenMetrics (seconds)",
}


def _seconds(text: str, openmetrics: bool, where: str) -> float:
    """A sample's timestamp in seconds since the epoch (OpenMetrics: seconds; text: ms)."""
    fmt = "OpenMetrics" if openmetrics else "Prometheus text"
    if not is_finite_number(text):
        raise ConfigError(
            f"{where}: timestamp {text[:40]!r} is not a finite number; {fmt} timestamps are "
            f"{_UNIT[openmetrics]} since the epoch"
        )
    if not openmetrics and not text.lstrip("-").isdigit():
        raise ConfigError(
            f"{where}: timestamp {text[:40]!r} is not whole milliseconds, which Prometheus text "
            f"writes; {_OTHER_FORMAT[False]}"
        )
    ts = float(text) if openmetrics else int(text) / 1000.0
    if not _EARLIEST_S <= ts < _LATEST_S:
        year = 1970 + ts / _SECONDS_PER_YEAR
        year_text = f"{year:,.0f}" if abs(year) >= 10_000 else f"{year:.0f}"
        raise ConfigError(
            f"{where}: timestamp {text[:40]} read as {fmt} {_UNIT[openmetrics]} falls in the "
            f"year {year_text}, not between 1990 and 2200; write {_UNIT[openmetrics]} since "
            f"the epoch, {_OTHER_FORMAT[openmetrics]}"
        )
    return ts


def check_target_name(name: str) -> str:
    """The target name, refused when empty or longer than the store holds.

    Raises:
        ConfigError: naming ``--target`` and the limit.
    """
    if not name.strip():
        raise ConfigError("--target is empty; name the target the samples belong to")
    if len(name) > MAX_TARGET_NAME_CHARS:
        raise ConfigError(
            f"--target {name[:40]!r}... is {len(name)} characters; the store holds names of "
            f"at most {MAX_TARGET_NAME_CHARS}"
        )
    return name


def parse_history(text: str, source: str) -> dict[float, tuple[Family, ...]]:
    """Raw families per timestamp (seconds), parsed like a scrape.

    Raises:
        ConfigError: a missing, duplicate, out-of-order or implausible timestamp, or a line
            that does not parse.
    """
    out = {}
    for ts, body in split_by_timestamp(text, source).items():
        try:
            parsed = parse_text(body, content_type="text/plain", source=source)
        except SourceError as e:
            raise ConfigError(f"{source}: {e}") from e
        if parsed.skipped:
            bad = parsed.skipped[0]
            raise ConfigError(
                f"{source}: the samples at {ts:g} hold a line that does not parse "
                f"({bad.reason}): {bad.text[:120]!r}"
            )
        out[ts] = parsed.families
    return out


def import_openmetrics(
    store: Store, path: str | Path, target: str, kind: str = "vllm"
) -> ImportResult:
    """Store a history file (OpenMetrics or Prometheus text) as scrapes of ``target``.

    Args:
        store: the open store.
        path: the file.
        target: target name (registered with ``kind`` when new).
        kind: which source maps the raw names (one of :data:`IMPORT_KINDS`).

    Raises:
        ConfigError: an unreadable or invalid file, an empty or over-long target name, or an
            unknown kind (nothing stored).
    """
    check_target_name(target)
    if kind not in IMPORT_KINDS:
        raise ConfigError(f"--kind {kind!r} is unknown; use one of {', '.join(IMPORT_KINDS)}")
    text = read_text(path, "metrics history file", ConfigError)
    per_ts = parse_history(text, str(path))
    if not per_ts:
        raise ConfigError(f"{path}: no sample with a timestamp; nothing to import")
    source_class = SOURCES[SourceKind(kind)]
    assert issubclass(source_class, PromTextSource)  # what IMPORT_KINDS holds
    source = source_class()
    encoder = SampleEncoder(heartbeat_s=0.0)
    samples: list[SampleIn] = []
    for ts, raw in per_ts.items():
        samples.extend(encoder.encode(target, source.from_families(list(raw)), ts))
    if target not in {t.name for t in list_targets(store)}:
        register_target(store, target, kind, "")
    written = write_samples(store, samples)
    stamps = list(per_ts)
    return ImportResult(target, written, len(stamps), stamps[0], stamps[-1])
