"""Interval sets on one timeline: unions and how much of a window they cover.

A set is two sorted arrays ``(start, end)`` of disjoint intervals. Overlap between two sets is
never computed directly: ``|A ∩ B| = |A| + |B| - |A ∪ B|`` needs only union lengths, which is
what every split here is made of.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
Intervals = tuple[F64, F64]

EMPTY: Intervals = (np.zeros(0), np.zeros(0))


def union(parts: Sequence[Intervals]) -> Intervals:
    """The disjoint, sorted union of any intervals (overlapping, unsorted, zero-length)."""
    start = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    end = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    if start.size == 0:
        return EMPTY
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    # A new merged interval begins where a start lies beyond everything before it.
    begins = np.empty(start.size, dtype=bool)
    begins[0] = True
    begins[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(begins)
    last = np.append(first[1:] - 1, start.size - 1)
    return start[first], reach[last]


def covered(s: Intervals, lo: F64, hi: F64) -> F64:
    """Length of the disjoint set ``s`` inside each window ``[lo[i], hi[i]]``."""
    return _measure_below(s, hi) - _measure_below(s, lo)


def _measure_below(s: Intervals, t: F64) -> F64:
    start, end = s
    if start.size == 0:
        return np.zeros(t.shape)
    cum = np.concatenate(([0.0], np.cumsum(end - start)))
    k = np.searchsorted(start, t, side="right")
    # The k-th interval (the last starting at or before t) may reach past t.
    overshoot = np.where(k > 0, np.maximum(end[np.maximum(k - 1, 0)] - t, 0.0), 0.0)
    return np.asarray(cum[k] - overshoot, dtype=np.float64)
