"""What kind of series a metric is, one definition for the agent and the store.

A histogram family ``F`` is written as ``F_bucket`` (with ``le``), ``F_sum`` and ``F_count``;
a summary as quantile samples plus ``F_sum`` and ``F_count``.
"""

from __future__ import annotations

from enum import StrEnum


class MetricType(StrEnum):
    """Prometheus / OpenMetrics family types (``unknown`` where the exposition gave none;
    Prometheus' older word for it, ``untyped``, reads as ``unknown``)."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    SUMMARY = "summary"
    INFO = "info"
    UNKNOWN = "unknown"


_CUMULATIVE_SUFFIXES = ("_bucket", "_sum", "_count")


def is_cumulative(type_: str, name: str) -> bool:
    """Whether a sample of a family of type ``type_`` only grows between resets: every
    counter sample, and the ``_bucket`` / ``_sum`` / ``_count`` samples of histograms and
    summaries (a summary's quantiles go up and down).

    Args:
        type_: a :class:`MetricType` (or its value, as the store keeps it).
        name: the full sample name.
    """
    if type_ == MetricType.COUNTER:
        return True
    return type_ in (MetricType.HISTOGRAM, MetricType.SUMMARY) and name.endswith(
        _CUMULATIVE_SUFFIXES
    )
