"""Turning scrapes into store samples, leaving out cumulative values that did not change.

Gauges and ``up`` are written on every scrape. Cumulative series (counters and histogram
``_bucket`` / ``_sum`` / ``_count``) are written when their value changed, and at least every
``heartbeat_s`` seconds when it did not. Nothing is lost: the store's window queries
(increase, rate, bucket-delta quantiles) read the last sample *at or before* each window
edge, and an unchanged cumulative value at the edge equals the last one written; a drop (an
engine restart) is a change, so it is written and the store records the reset. The
heartbeat keeps a recent sample for retention and for readers looking at raw rows. An idle
engine's histograms then cost a few rows a minute instead of hundreds a second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slotune.collector.agent.base import Family, Labels, MetricType, Scrape
from slotune.collector.agent.bounds import MAX_NAME_CHARS, SampleBounds
from slotune.collector.series import is_cumulative
from slotune.collector.store import SampleIn

DEFAULT_HEARTBEAT_S = 60.0
_MAX_TRACKED = 1_000_000


_CUMULATIVE_TYPES = (MetricType.COUNTER, MetricType.HISTOGRAM, MetricType.SUMMARY)


@dataclass(frozen=True, slots=True)
class _FamilyMemo:
    """What encoding one family object gave, so the same object again costs no per-sample work.

    Attributes:
        family: the family object encoded.
        rows: for families written whole every scrape, the (name, type, labels, value) rows.
        oldest_write: for cumulative families, when the series of the family written longest
            ago was written (an unchanged family writes nothing until its heartbeat is due).
        num_values: non-NaN samples of a cumulative family (counted as skipped).
    """

    family: Family
    rows: tuple[tuple[str, str, dict[str, str], float], ...] | None
    oldest_write: float
    num_values: int


class SampleEncoder:
    """Builds :class:`~collector.store.SampleIn` batches from scrapes (one per agent).

    Args:
        heartbeat_s: longest time an unchanged cumulative series goes unwritten; 0 writes
            every sample of every scrape.
    """

    def __init__(self, heartbeat_s: float = DEFAULT_HEARTBEAT_S) -> None:
        self.heartbeat_s = heartbeat_s
        # (target, name, labels) -> (value, ts) of the last sample written
        self._last: dict[tuple[str, str, Labels], tuple[float, float]] = {}
        # None: a label set past the bounds, whose samples are dropped
        self._label_dicts: dict[Labels, dict[str, str] | None] = {}
        # (target, family name) -> what the family object seen last gave (see _FamilyMemo)
        self._memo: dict[tuple[str, str], _FamilyMemo] = {}
        self.num_skipped = 0
        self.bounds = SampleBounds()

    def encode(self, target: str, scrape: Scrape, ts: float) -> list[SampleIn]:
        """Samples of one scrape, stamped ``ts``; NaN values are left out."""
        if len(self._last) > _MAX_TRACKED or len(self._label_dicts) > _MAX_TRACKED:
            self._last.clear()
            self._label_dicts.clear()
            self._memo.clear()
        out: list[SampleIn] = []
        memo = self._memo
        for fam in (*scrape.raw, *scrape.canonical):
            key = (target, fam.name)
            seen = memo.get(key)
            if seen is not None and seen.family is fam:
                # The source handed back the same family object: no value changed.
                if seen.rows is not None:
                    out.extend([SampleIn(target, n, t, lab, ts, v) for n, t, lab, v in seen.rows])
                    continue
                if ts - seen.oldest_write < self.heartbeat_s:
                    self.num_skipped += seen.num_values
                    continue
            memo[key] = self._encode_family(target, fam, ts, out)
        return out

    def _encode_family(
        self, target: str, fam: Family, ts: float, out: list[SampleIn]
    ) -> _FamilyMemo:
        last = self._last
        type_ = fam.type.value
        dedup = bool(self.heartbeat_s) and fam.type in _CUMULATIVE_TYPES
        # every sample of a counter or histogram family is cumulative; of a summary, not all
        check_each = fam.type is MetricType.SUMMARY
        rows: list[tuple[str, str, dict[str, str], float]] = []
        oldest_write = ts
        num_values = 0
        for s in fam.samples:
            value = s.value
            if math.isnan(value):
                continue
            if not 0 < len(s.name) <= MAX_NAME_CHARS and not self.bounds.name_ok(target, s.name):
                continue
            labels = self._labels(target, s.labels)
            if labels is None:
                self.bounds.note_dropped(target, 1)
                continue
            num_values += 1
            if dedup and (not check_each or is_cumulative(fam.type, s.name)):
                key = (target, s.name, s.labels)
                prev = last.get(key)
                if prev is not None and prev[0] == value and ts - prev[1] < self.heartbeat_s:
                    self.num_skipped += 1
                    if prev[1] < oldest_write:
                        oldest_write = prev[1]
                    continue
                last[key] = (value, ts)
            rows.append((s.name, type_, labels, value))
        out.extend([SampleIn(target, n, t, lab, ts, v) for n, t, lab, v in rows])
        if dedup and not check_each:
            return _FamilyMemo(fam, None, oldest_write, num_values)
        # gauges (everything, with no heartbeat) are written whole on every scrape; summaries
        # mix cumulative and other samples and always take the per-sample path
        return _FamilyMemo(fam, None if dedup else tuple(rows), -math.inf, 0)

    def _labels(self, target: str, labels: Labels) -> dict[str, str] | None:
        # One dict per label set, shared by its samples and kept across scrapes: the store
        # only reads it, and recognises a series by the identity of its labels object.
        try:
            return self._label_dicts[labels]
        except KeyError:
            found = self._label_dicts[labels] = self.bounds.labels(target, dict(labels))
            return found
