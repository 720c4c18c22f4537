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

from collector.agent.base import Labels, MetricType, Scrape
from collector.store import SampleIn

DEFAULT_HEARTBEAT_S = 60.0
_STORE_TYPES = {MetricType.UNTYPED: "unknown"}
_CUMULATIVE_SUFFIXES = ("_bucket", "_sum", "_count")
_MAX_TRACKED = 1_000_000


_CUMULATIVE_TYPES = (MetricType.COUNTER, MetricType.HISTOGRAM, MetricType.SUMMARY)


def is_cumulative(kind: MetricType, name: str) -> bool:
    """Whether a sample only grows between resets."""
    if kind is MetricType.COUNTER:
        return True
    return kind in _CUMULATIVE_TYPES and name.endswith(_CUMULATIVE_SUFFIXES)


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
        self._label_dicts: dict[Labels, dict[str, str]] = {}
        self.num_skipped = 0

    def encode(self, target: str, scrape: Scrape, ts: float) -> list[SampleIn]:
        """Samples of one scrape, stamped ``ts``; NaN values are left out."""
        if len(self._last) > _MAX_TRACKED or len(self._label_dicts) > _MAX_TRACKED:
            self._last.clear()
            self._label_dicts.clear()
        out: list[SampleIn] = []
        last = self._last
        for fam in (*scrape.raw, *scrape.canonical):
            type_ = _STORE_TYPES.get(fam.type, fam.type.value)
            dedup = bool(self.heartbeat_s) and fam.type in _CUMULATIVE_TYPES
            # every sample of a counter or histogram family is cumulative; of a summary, not all
            check_each = fam.type is MetricType.SUMMARY
            for s in fam.samples:
                value = s.value
                if math.isnan(value):
                    continue
                if dedup and (not check_each or is_cumulative(fam.type, s.name)):
                    key = (target, s.name, s.labels)
                    prev = last.get(key)
                    if prev is not None and prev[0] == value and ts - prev[1] < self.heartbeat_s:
                        self.num_skipped += 1
                        continue
                    last[key] = (value, ts)
                out.append(SampleIn(target, s.name, type_, self._labels(s.labels), ts, value))
        return out

    def _labels(self, labels: Labels) -> dict[str, str]:
        # One dict per label set, shared by its samples and kept across scrapes: the store
        # only reads it, and recognises a series by the identity of its labels object.
        found = self._label_dicts.get(labels)
        if found is None:
            found = self._label_dicts[labels] = dict(labels)
        return found
