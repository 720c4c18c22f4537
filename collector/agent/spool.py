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
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from slotune.collector.store import SampleIn

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


def _encode(batch: Sequence[SampleIn]) -> str:
    rows = [[s.target, s.name, s.type, dict(s.labels), s.ts, s.value] for s in batch]
    return json.dumps(rows, separators=(",", ":")) + "\n"


def _decode(line: str) -> list[SampleIn]:
    return [
        SampleIn(t, n, ty, lbl, float(ts), float(v)) for t, n, ty, lbl, ts, v in json.loads(line)
    ]


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
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.segment_bytes = min(segment_bytes, max_bytes)
        self._dropped_batches = 0
        self._dropped_samples = 0

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
            for line in oldest.read_text(encoding="utf-8").splitlines():
                batches += 1
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
        with segment.open(encoding="utf-8") as f:
            for line in f:
                try:
                    yield _decode(line)
                except (ValueError, TypeError):
                    # A line torn by a crash mid-write: it was never acknowledged as stored.
                    log.warning("spool %s: skipped a torn line", segment.name)

    def stats(self) -> SpoolStats:
        """Current size and drop counts."""
        segments = self._segments()
        return SpoolStats(
            len(segments),
            sum(p.stat().st_size for p in segments),
            self._dropped_batches,
            self._dropped_samples,
        )
