"""Percentiles over weighted samples, shared by the SLO maths and the summaries."""

from __future__ import annotations

import numpy as np


def weighted_percentile(
    values: list[float] | np.ndarray, weights: list[int] | np.ndarray, q: float
) -> float:
    """Percentile ``q`` (0-100) of values repeated by integer weights (linear interpolation)."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=np.int64)
    if v.size == 0:
        return float("nan")
    if np.all(w == 1):
        return float(np.percentile(v, q))
    return float(np.percentile(np.repeat(v, w), q))
