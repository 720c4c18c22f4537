"""Importing a past incident: an OpenMetrics file with timestamps into the store.

The file is what ``promtool tsdb create-blocks-from openmetrics`` reads (every sample
carries a timestamp in seconds, the file ends with ``# EOF``). Each timestamp becomes one
scrape of the target: the same source as the agent's (``--kind``) maps the raw families
onto canonical names, so the evaluator and the dashboard read the import exactly like live
data. The whole file is checked before anything is stored, and stored in one transaction.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from slotune.collector.agent.base import Family, SourceKind
from slotune.collector.agent.encode import SampleEncoder
from slotune.collector.agent.promsource import PromTextSource
from slotune.collector.agent.promtext import parse_text
from slotune.collector.agent.registry import SOURCES
from slotune.collector.errors import ConfigError, SourceError
from slotune.collector.slo import read_text
from slotune.collector.store import SampleIn, Store, list_targets, register_target, write_samples

IMPORT_KINDS = ("vllm", "sglang", "trtllm", "dcgm")
# series key (name and labels as written) and timestamp of a sample line, exemplar left out
_LINE_RE = re.compile(r"^(?P<key>[^\s{]+(?:\{.*\})?)\s+\S+(?:\s+(?P<ts>\S+))?\s*$")


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

    Raises:
        ConfigError: naming ``source:line`` and the fix.
    """
    if text.rstrip().splitlines()[-1:] != ["# EOF"]:
        raise ConfigError(f"{source}: not OpenMetrics: the file must end with a '# EOF' line")
    headers: list[str] = []
    bodies: dict[float, list[str]] = defaultdict(list)
    last: dict[str, float] = {}
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.split(" # ", 1)[0].strip()  # exemplars are not values
        if not line or line == "# EOF":
            continue
        if line.startswith("#"):
            headers.append(line)
            continue
        m = _LINE_RE.match(line)
        if m is None:
            raise ConfigError(f"{source}:{number}: not a sample line: {line[:120]!r}")
        if m["ts"] is None:
            raise ConfigError(
                f"{source}:{number}: sample without a timestamp; history import needs one on "
                "every sample (seconds since the epoch, after the value)"
            )
        try:
            ts = float(m["ts"])
        except ValueError as e:
            raise ConfigError(f"{source}:{number}: timestamp {m['ts']!r} is not a number") from e
        prev = last.get(m["key"])
        if prev is not None and ts <= prev:
            what = "a duplicate" if ts == prev else "an out-of-order"
            raise ConfigError(
                f"{source}:{number}: {what} timestamp {ts:g} for {m['key']} (previous {prev:g}); "
                "each series' samples must have increasing timestamps"
            )
        last[m["key"]] = ts
        bodies[ts].append(line[: m.start("ts")].rstrip())
    return {ts: "\n".join([*headers, *lines]) + "\n" for ts, lines in sorted(bodies.items())}


def parse_history(text: str, source: str) -> dict[float, tuple[Family, ...]]:
    """Raw families per timestamp, parsed like a scrape.

    Raises:
        ConfigError: not OpenMetrics, a missing, duplicate or out-of-order timestamp, or a
            line that does not parse.
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
    """Store an OpenMetrics history file as scrapes of ``target``.

    Args:
        store: the open store.
        path: the file.
        target: target name (registered with ``kind`` when new).
        kind: which source maps the raw names: vllm, sglang, trtllm or dcgm.

    Raises:
        ConfigError: an unreadable or invalid file, or an unknown kind (nothing stored).
    """
    if kind not in IMPORT_KINDS:
        raise ConfigError(f"--kind {kind!r} is unknown; use one of {', '.join(IMPORT_KINDS)}")
    text = read_text(path, "OpenMetrics file", ConfigError)
    per_ts = parse_history(text, str(path))
    if not per_ts:
        raise ConfigError(f"{path}: no sample with a timestamp; nothing to import")
    source = SOURCES[SourceKind(kind)]()
    assert isinstance(source, PromTextSource)  # every kind of IMPORT_KINDS reads text
    encoder = SampleEncoder(heartbeat_s=0.0)
    samples: list[SampleIn] = []
    for ts, raw in per_ts.items():
        samples.extend(encoder.encode(target, source.from_families(list(raw)), ts))
    if target not in {t.name for t in list_targets(store)}:
        register_target(store, target, kind, "")
    written = write_samples(store, samples)
    stamps = list(per_ts)
    return ImportResult(target, written, len(stamps), stamps[0], stamps[-1])
