"""Window queries over stored series, with Prometheus' semantics.

- Increases of cumulative series handle counter resets like ``increase()``: a drop means the
  counter restarted from zero. Unlike Prometheus, nothing is extrapolated: the increase is
  measured between the last sample at or before the window start (or the first sample in
  the window when there is none) and the last sample at or before its end.
- ``histogram_quantile`` interpolates linearly inside the bucket that holds the rank, as
  Prometheus' ``histogram_quantile(q, sum by (le) (increase(F_bucket[w])))`` does.
- When several series match (labels not given or partial), their values are summed
  (increase, rate, latest value) or pooled (gauge average).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, select, text

from slotune.collector.errors import ConfigError
from slotune.collector.store._models import MetricSeries, Target
from slotune.collector.store._store import Store

_AT_OR_BEFORE = text(
    "SELECT ts, value FROM sample WHERE series_id = :s AND ts <= :t ORDER BY ts DESC LIMIT 1"
)
_FIRST_AFTER = text(
    "SELECT ts, value FROM sample WHERE series_id = :s AND ts > :a AND ts <= :b ORDER BY ts LIMIT 1"
)
_RESETS = text(
    "SELECT COALESCE(SUM(prev_value), 0) FROM counter_reset "
    "WHERE series_id = :s AND ts > :a AND ts <= :b"
)
_RAW_SUM = text(
    "SELECT COALESCE(SUM(value), 0), COUNT(*) FROM sample "
    "WHERE series_id = :s AND ts >= :a AND ts < :b"
)
_ROLLUP_SUM = text(
    "SELECT COALESCE(SUM(sum), 0), COALESCE(SUM(count), 0) FROM sample_rollup "
    "WHERE series_id = :s AND ts >= :a AND ts < :b"
)


def matching_series(
    conn: Connection, target: str, name: str, labels: Mapping[str, str] | None
) -> list[tuple[int, dict[str, Any], float]]:
    """(id, labels, rollup horizon) of the series of ``target`` named ``name`` whose labels
    include every item of ``labels``."""
    rows = conn.execute(
        select(MetricSeries.id, MetricSeries.labels, MetricSeries.rollup_until_ts)
        .join(Target, Target.id == MetricSeries.target_id)
        .where(Target.name == target, MetricSeries.name == name)
    ).all()
    want = dict(labels or {})
    return [
        (sid, lbl, horizon if horizon is not None else -math.inf)
        for sid, lbl, horizon in rows
        if all(lbl.get(k) == v for k, v in want.items())
    ]


def series_increase(
    conn: Connection, series_id: int, start_ts: float, end_ts: float
) -> float | None:
    """Reset-aware increase of one cumulative series over (start_ts, end_ts]."""
    last = conn.execute(_AT_OR_BEFORE, {"s": series_id, "t": end_ts}).first()
    if last is None:
        return None
    base = conn.execute(_AT_OR_BEFORE, {"s": series_id, "t": start_ts}).first()
    if base is None:
        base = conn.execute(_FIRST_AFTER, {"s": series_id, "a": start_ts, "b": end_ts}).first()
        if base is None:
            return None
    if last[0] <= base[0]:
        return 0.0
    dropped = conn.execute(_RESETS, {"s": series_id, "a": base[0], "b": last[0]}).scalar_one()
    return float(last[1] - base[1] + dropped)


def _check_window(start_ts: float, end_ts: float) -> None:
    if not end_ts > start_ts:
        raise ConfigError(f"window end {end_ts} must be after its start {start_ts}")


def counter_increase(
    store: Store,
    target: str,
    name: str,
    start_ts: float,
    end_ts: float,
    labels: Mapping[str, str] | None = None,
) -> float | None:
    """Increase of a counter over a window, summed over the matching series.

    Args:
        store: the open store.
        target: target name.
        name: series name as stored (e.g. ``vllm:prompt_tokens_total``).
        start_ts: window start, epoch seconds.
        end_ts: window end, epoch seconds.
        labels: labels the series must carry (others are free).

    Returns:
        The increase, or None when no matching series has a sample by ``end_ts``.
    """
    _check_window(start_ts, end_ts)
    with store.connection() as conn:
        values = [
            series_increase(conn, sid, start_ts, end_ts)
            for sid, _, _ in matching_series(conn, target, name, labels)
        ]
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def counter_rate(
    store: Store,
    target: str,
    name: str,
    start_ts: float,
    end_ts: float,
    labels: Mapping[str, str] | None = None,
) -> float | None:
    """Per-second rate over a window: :func:`counter_increase` / window length."""
    increase = counter_increase(store, target, name, start_ts, end_ts, labels)
    return None if increase is None else increase / (end_ts - start_ts)


def latest_value(
    store: Store,
    target: str,
    name: str,
    labels: Mapping[str, str] | None = None,
    at_ts: float | None = None,
) -> float | None:
    """The newest value at or before ``at_ts`` (now when None), summed over matching series."""
    at = math.inf if at_ts is None else at_ts
    with store.connection() as conn:
        points = [
            conn.execute(_AT_OR_BEFORE, {"s": sid, "t": at}).first()
            for sid, _, _ in matching_series(conn, target, name, labels)
        ]
    values = [float(p[1]) for p in points if p is not None]
    return sum(values) if values else None


def gauge_avg(
    store: Store,
    target: str,
    name: str,
    start_ts: float,
    end_ts: float,
    labels: Mapping[str, str] | None = None,
) -> float | None:
    """Mean of a gauge's samples in [start_ts, end_ts), pooled over matching series.

    The window is half-open so that it splits exactly along roll-up steps: rolled-up time
    uses the roll-ups' sums and counts, so averages survive retention.
    """
    _check_window(start_ts, end_ts)
    total, count = 0.0, 0
    with store.connection() as conn:
        for sid, _, horizon in matching_series(conn, target, name, labels):
            raw_from = max(start_ts, horizon)
            s, n = conn.execute(_RAW_SUM, {"s": sid, "a": raw_from, "b": end_ts}).one()
            total, count = total + float(s), count + int(n)
            if start_ts < horizon:
                s, n = conn.execute(
                    _ROLLUP_SUM, {"s": sid, "a": start_ts, "b": min(end_ts, horizon)}
                ).one()
                total, count = total + float(s), count + int(n)
    return total / count if count else None


def histogram_quantile(
    store: Store,
    target: str,
    family: str,
    q: float,
    start_ts: float,
    end_ts: float,
    labels: Mapping[str, str] | None = None,
) -> float | None:
    """Quantile ``q`` of a histogram family over a window, from its bucket increases.

    Args:
        store: the open store.
        target: target name.
        family: histogram family without suffix, e.g. ``vllm:time_to_first_token_seconds``.
        q: quantile in [0, 1] (0.99 for p99).
        start_ts: window start, epoch seconds.
        end_ts: window end, epoch seconds.
        labels: labels the bucket series must carry besides ``le``.

    Returns:
        The estimate in the histogram's unit; None when the window holds no observation.

    Raises:
        ConfigError: ``q`` outside [0, 1] or an empty window.
    """
    if not 0.0 <= q <= 1.0:
        raise ConfigError(f"quantile {q!r} must be between 0 and 1 (0.99 for p99)")
    per_le = histogram_increases(store, target, family, start_ts, end_ts, labels)
    return bucket_quantile(q, sorted(per_le.items()))


def histogram_increases(
    store: Store,
    target: str,
    family: str,
    start_ts: float,
    end_ts: float,
    labels: Mapping[str, str] | None = None,
) -> dict[float, float]:
    """Increase of each bucket of a histogram family over a window, by upper bound (cumulative
    counts, as ``le`` buckets are), summed over the matching series; empty without data.

    Raises:
        ConfigError: an empty window.
    """
    _check_window(start_ts, end_ts)
    per_le: dict[float, float] = {}
    with store.connection() as conn:
        for sid, lbl, _ in matching_series(conn, target, f"{family}_bucket", labels):
            le = parse_le(lbl.get("le"))
            inc = series_increase(conn, sid, start_ts, end_ts)
            if le is not None and inc is not None:
                per_le[le] = per_le.get(le, 0.0) + inc
    return per_le


def parse_le(value: Any) -> float | None:
    """A bucket's ``le`` label as a float (``+Inf`` too); None when it is not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus' ``bucketQuantile``: ``buckets`` are (upper bound, cumulative count) sorted
    by bound and must end with +Inf; None when there are no observations."""
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]):
        return None
    bounds = [b for b, _ in buckets]
    counts: list[float] = []
    for _, c in buckets:  # scrapes are not atomic: force monotonic counts like Prometheus
        counts.append(max(c, counts[-1]) if counts else c)
    observations = counts[-1]
    if observations <= 0:
        return None
    rank = q * observations
    b = next((i for i, c in enumerate(counts[:-1]) if c >= rank), len(counts) - 1)
    if b == len(counts) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, count = 0.0, counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    if count <= 0:  # q = 0 with an empty first bucket
        return start
    return start + (bounds[b] - start) * (rank / count)
