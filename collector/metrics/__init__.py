"""Metrics read in place from a Prometheus-compatible query API (``--metrics URL``).

The store is the other implementation of the same reads (``collector.store``); the SLIs over
either are in ``collector.alerts`` (:func:`~collector.alerts.sli_reader`).

Public surface:

- :class:`PromClient`: ``/api/v1/query``, ``query_range``, ``series``, ``labels`` with bounded
  replies and one-line errors (:class:`~collector.errors.MetricsUnavailable`).
- :func:`open_metrics` ``(url) -> PromClient | None``: the client for ``--metrics`` (None:
  the store).
- :class:`MetricsReader` (:class:`StoreMetrics`, :class:`PromMetrics`),
  :func:`metrics_reader` ``(store, client)``: what a target did over a window (bucket and
  counter increases, newest values, gauge averages), from either.
- :func:`bucket_query`, :func:`bucket_sums`: a histogram's bucket increases as PromQL (grouped
  by target, pool and model when many selectors share one query) and their sums per bound.
- :func:`read_window` ``(reader, target, start_ts, end_ts) -> TargetWindow``: one target's
  histograms (bucket increases), counters and gauge means over a window (``sim calibrate``).
- :func:`summarize_metrics` (``slotune metrics summary``): per-target figures over a window.
- :func:`raw_names`, :func:`outcome_counters`: every engine's own names for a canonical metric.
- ``promql`` (a module): selector matchers (a target is ``job/instance``) and name regexes.
"""

from slotune.collector.metrics._client import MAX_REPLY_BYTES, PromClient, Series
from slotune.collector.metrics._names import RawName, outcome_counters, raw_names
from slotune.collector.metrics._open import open_metrics
from slotune.collector.metrics._reader import (
    MetricsReader,
    PromMetrics,
    StoreMetrics,
    TargetWindow,
    bucket_query,
    bucket_sums,
    kind_prefixes,
    metrics_reader,
    read_window,
)
from slotune.collector.metrics.summary import TargetMetricsSummary, summarize_metrics

__all__ = [
    "MAX_REPLY_BYTES",
    "MetricsReader",
    "PromClient",
    "PromMetrics",
    "RawName",
    "Series",
    "StoreMetrics",
    "TargetMetricsSummary",
    "TargetWindow",
    "bucket_query",
    "bucket_sums",
    "kind_prefixes",
    "metrics_reader",
    "open_metrics",
    "outcome_counters",
    "raw_names",
    "read_window",
    "summarize_metrics",
]
