"""Bounds on what a target may write, checked before the store sees it.

A target is not trusted: a metric name longer than the store's column, a label set with
thousands of labels or a megabyte label value would make the store refuse the whole batch,
and with it the samples of every other target. Such samples are dropped (names, label keys,
too many labels: truncating them could merge two series into one) or truncated (label
values), counted per target, and reported at most once a minute per target.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_NAME_CHARS = 200  # the store's metric_series.name column
MAX_LABELS = 64
MAX_LABEL_KEY_CHARS = 200
MAX_LABEL_VALUE_CHARS = 1024
_REPORT_INTERVAL_S = 60.0


@dataclass(frozen=True, slots=True)
class BoundCounts:
    """What the bounds changed for one target since the agent started."""

    num_dropped: int
    num_truncated: int  # label sets with a value cut


class _TargetTally:
    __slots__ = ("dropped", "reported_at", "truncated", "why")

    def __init__(self) -> None:
        self.dropped = 0
        self.truncated = 0
        self.why = ""
        self.reported_at = -_REPORT_INTERVAL_S


class SampleBounds:
    """Checks names and label sets against the bounds; counts and reports per target."""

    def __init__(self) -> None:
        self._tallies: dict[str, _TargetTally] = {}

    def name_ok(self, target: str, name: str) -> bool:
        """Whether a sample name fits; a name that does not is counted as dropped."""
        if 0 < len(name) <= MAX_NAME_CHARS:
            return True
        self._note(target, dropped=1, why=f"metric name of {len(name)} characters")
        return False

    def labels(self, target: str, labels: Mapping[str, str]) -> dict[str, str] | None:
        """The label set as stored (long values truncated), or None to drop its samples.

        Call once per label set (the encoder caches the result): its samples are counted
        by the caller through :meth:`note_dropped`.
        """
        if len(labels) > MAX_LABELS:
            self._note(target, why=f"{len(labels)} labels (at most {MAX_LABELS})")
            return None
        out: dict[str, str] = {}
        cut = ""
        for key, value in labels.items():
            if not 0 < len(key) <= MAX_LABEL_KEY_CHARS:
                self._note(target, why=f"label name of {len(key)} characters")
                return None
            if len(value) > MAX_LABEL_VALUE_CHARS:
                cut = f"label {key[:40]!r} of {len(value)} characters"
                value = value[:MAX_LABEL_VALUE_CHARS]
            out[key] = value
        if cut:
            self._note(target, truncated=1, why=cut)
        return out

    def note_dropped(self, target: str, num: int) -> None:
        """Count samples dropped because their label set was refused."""
        self._note(target, dropped=num)

    def counts(self, target: str) -> BoundCounts:
        """What was dropped and truncated for ``target``."""
        t = self._tallies.get(target)
        return BoundCounts(t.dropped, t.truncated) if t else BoundCounts(0, 0)

    def _note(self, target: str, *, dropped: int = 0, truncated: int = 0, why: str = "") -> None:
        t = self._tallies.get(target)
        if t is None:
            t = self._tallies[target] = _TargetTally()
        t.dropped += dropped
        t.truncated += truncated
        t.why = why or t.why
        now = time.monotonic()
        if (dropped or truncated) and now - t.reported_at >= _REPORT_INTERVAL_S:
            t.reported_at = now
            log.warning(
                "target %s exposes samples the store cannot hold (latest: %s): %d dropped, "
                "%d label sets with a value cut to %d characters so far (names at most %d "
                "characters, at most %d labels of names up to %d characters)",
                target,
                t.why,
                t.dropped,
                t.truncated,
                MAX_LABEL_VALUE_CHARS,
                MAX_NAME_CHARS,
                MAX_LABELS,
                MAX_LABEL_KEY_CHARS,
            )
