"""A bounded on-disk queue of sample batches for when the store cannot be reached.

Policy:

- Batches are appended, one JSON line each, to segment files ``spool-<seq>.jsonl`` in the
  spool directory; a segment is closed at ``segment_bytes`` and a new one started.
- Size cap ``max_bytes`` (default 256 MiB): when the spool would grow past it, the **oldest**
  segments are deleted (*drop-oldest*): a long outage loses its beginning, never the most
  recent data, which is what dashboards and alerts need when the store returns. Dropped
  batches and samples are counted and logged.
- Replay reads segments oldest first, batch by batch, and deletes a segment only after every
  batch of it was written. A crash in the middle replays the segment again; the store's
  primary key ``(series, ts)`` makes that a no-op, so there are no duplicates and no gaps.
- Segments survive an agent restart: the next agent replays them first.
- Quarantine: a batch the store *refuses* (not a store that is down) and a spool line that
  is not a batch (torn by a crash, or edited) go to ``rejected/rejected.jsonl`` with the
  reason, one JSON object a line, so they can be inspected and the writer moves on. That
  file is capped at ``max_bytes // 4``; past it rejected batches are only counted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from slotune.collector.store import SampleIn
from slotune.collector.textfile import output_dir

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SpoolStats:
    """What the spool holds and what it had to drop."""

    num_segments: int
    num_bytes: int
    num_dropped_batches: int
    num_dropped_samples: int
    num_rejected_batches: int
    num_rejected_samples: int


def _rows(batch: Sequence[SampleIn]) -> list[list[object]]:
    return [[s.target, s.name, s.type, dict(s.labels), s.ts, s.value] for s in batch]


def _encode(batch: Sequence[SampleIn]) -> str:
    return json.dumps(_rows(batch), separators=(",", ":")) + "\n"


def _decode(line: str) -> list[SampleIn]:
    """One spooled batch; ValueError for anything that is not one (nothing half-read)."""
    rows = json.loads(line)
    if not isinstance(rows, list):
        raise ValueError("a spool line is a JSON list of samples")
    return [_sample(row) for row in rows]


def _sample(row: object) -> SampleIn:
    if not isinstance(row, list) or len(row) != 6:
        raise ValueError("a spooled sample is [target, name, type, labels, ts, value]")
    target, name, type_, labels, ts, value = row
    if not (isinstance(target, str) and isinstance(name, str) and isinstance(type_, str)):
        raise ValueError("a spooled sample's target, name and type are strings")
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ValueError("a spooled sample's labels are a mapping of strings to strings")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (ts, value)):
        raise ValueError("a spooled sample's timestamp and value are numbers")
    return SampleIn(target, name, type_, labels, float(ts), float(value))


class Spool:
    """Segmented, size-capped, drop-oldest spool of sample batches.

    Args:
        directory: where the segments live (created when missing).
        max_bytes: size cap over all segments.
        segment_bytes: size at which a segment is closed.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    ) -> None:
        self.directory = output_dir(directory, "spool directory (--spool-dir)")
        self.max_bytes = max_bytes
        self.segment_bytes = min(segment_bytes, max_bytes)
        self._dropped_batches = 0
        self._dropped_samples = 0
        self._rejected_batches = 0
        self._rejected_samples = 0

    def _segments(self) -> list[Path]:
        return sorted(self.directory.glob("spool-*.jsonl"))

    def is_empty(self) -> bool:
        """Whether nothing is waiting to be replayed."""
        return not any(p.stat().st_size for p in self._segments())

    def append(self, batch: Sequence[SampleIn]) -> None:
        """Add a batch at the end, dropping the oldest segments beyond the cap."""
        if not batch:
            return
        line = _encode(batch)
        segments = self._segments()
        current = segments[-1] if segments else None
        if current is None or current.stat().st_size + len(line) > self.segment_bytes:
            seq = int(current.stem.split("-")[1]) + 1 if current else 1
            current = self.directory / f"spool-{seq:012d}.jsonl"
            segments.append(current)
        with current.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._enforce_cap(segments)

    def _enforce_cap(self, segments: list[Path]) -> None:
        sizes = [p.stat().st_size for p in segments]
        while len(segments) > 1 and sum(sizes) > self.max_bytes:
            oldest = segments.pop(0)
            sizes.pop(0)
            batches, samples = 0, 0
            for line in oldest.read_text(encoding="utf-8", errors="replace").splitlines():
                batches += 1
                with contextlib.suppress(ValueError, RecursionError):
                    samples += len(json.loads(line))
            oldest.unlink()
            self._dropped_batches += batches
            self._dropped_samples += samples
            log.warning(
                "spool over %d bytes: dropped its oldest %d samples (%s)",
                self.max_bytes,
                samples,
                oldest.name,
            )

    def replay(self, write: Callable[[list[SampleIn]], object]) -> int:
        """Hand every spooled batch, oldest first, to ``write``; delete what was written.

        ``write`` raising (the store went away again) stops the replay; the segment in
        progress stays and is replayed in full next time.

        Returns:
            How many batches were written.
        """
        written = 0
        for segment in self._segments():
            for batch in self._batches(segment):
                write(batch)
                written += 1
            segment.unlink()
        return written

    def _batches(self, segment: Path) -> Iterator[list[SampleIn]]:
        with segment.open(encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                try:
                    batch = _decode(line)
                except (ValueError, RecursionError) as e:
                    # Torn by a crash mid-write (never acknowledged as stored) or not written
                    # by an agent: set aside, so it cannot stop the replay.
                    self._quarantine_line(line, f"{segment.name}:{number}: {e}")
                    continue
                yield batch

    @property
    def rejected_path(self) -> Path:
        """Where quarantined batches and lines go."""
        return self.directory / "rejected" / "rejected.jsonl"

    def quarantine(self, batch: Sequence[SampleIn], reason: str) -> None:
        """Set aside a batch the store refused, with the reason."""
        self._set_aside({"reason": reason, "samples": _rows(batch)}, len(batch))

    def _quarantine_line(self, line: str, reason: str) -> None:
        self._set_aside({"reason": reason, "line": line.rstrip("\n")}, 0)

    def _set_aside(self, entry: dict[str, object], num_samples: int) -> None:
        self._rejected_batches += 1
        self._rejected_samples += num_samples
        log.error(
            "quarantined %s (%s); %d batches set aside so far, in %s",
            f"{num_samples} samples" if num_samples else "a spool line",
            entry["reason"],
            self._rejected_batches,
            self.rejected_path,
        )
        path = self.rejected_path
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        try:
            path.parent.mkdir(exist_ok=True)
            if path.exists() and path.stat().st_size + len(line) > self.max_bytes // 4:
                return  # counted above; the file keeps the first ones for inspection
            with path.open("a", encoding="utf-8") as f:
                f.write(line)
        except OSError as e:
            log.error("cannot write %s (%s): the batch is only counted", path, e)

    def stats(self) -> SpoolStats:
        """Current size and drop counts."""
        segments = self._segments()
        return SpoolStats(
            len(segments),
            sum(p.stat().st_size for p in segments),
            self._dropped_batches,
            self._dropped_samples,
            self._rejected_batches,
            self._rejected_samples,
        )
