"""Retention: prune old rows and roll old samples up to one point per step.

A roll-up keeps, per series and step (a minute by default), the last raw sample: for
cumulative series that is all window queries need (resets stay recorded in
``counter_reset``). Gauges also get min / max / sum / count of the step in ``sample_rollup``
so averages over rolled-up time stay exact. ``metric_series.rollup_until_ts`` marks where
raw data begins.
"""

from __future__ import annotations

import math
import time

from sqlalchemy import Connection, delete, func, select, text, update

from slotune.collector.errors import ConfigError
from slotune.collector.store._models import (
    AlertEvent,
    CounterReset,
    MetricSeries,
    Sample,
    SampleRollup,
)
from slotune.collector.store._records import RetentionCounts
from slotune.collector.store._store import Store, translate_errors

# Matches collector.series.is_cumulative, in SQL.
_CUMULATIVE_SQL = (
    "(m.type = 'counter' OR (m.type IN ('histogram', 'summary') AND ("
    "substr(m.name, length(m.name) - 6) = '_bucket' OR "
    "substr(m.name, length(m.name) - 3) = '_sum' OR "
    "substr(m.name, length(m.name) - 5) = '_count')))"
)


def _bucket_sql(conn: Connection, column: str) -> str:
    # Epoch times are positive, so SQLite's truncating cast is a floor.
    if conn.dialect.name == "sqlite":
        return f"(CAST({column} / :step AS INTEGER) * :step)"
    return f"(floor({column} / :step) * :step)"


def prune(store: Store, older_than_s: float, *, now: float | None = None) -> RetentionCounts:
    """Delete samples, roll-ups, recorded resets and alert events older than ``older_than_s``.

    Benchmark runs, SLOs, studies and diagnoses are kept: they are results, not telemetry.

    Returns:
        Rows deleted per table.
    """
    if older_than_s <= 0:
        raise ConfigError(f"--older-than must be positive, got {older_than_s} s")
    cutoff = (time.time() if now is None else now) - older_than_s
    with store.connection() as conn:
        counts = RetentionCounts(
            samples=conn.execute(delete(Sample).where(Sample.ts < cutoff)).rowcount,
            rollups=conn.execute(delete(SampleRollup).where(SampleRollup.ts < cutoff)).rowcount,
            counter_resets=conn.execute(
                delete(CounterReset).where(CounterReset.ts < cutoff)
            ).rowcount,
            alert_events=conn.execute(delete(AlertEvent).where(AlertEvent.ts < cutoff)).rowcount,
        )
    store.cache.clear()
    return counts


def vacuum(store: Store) -> int | None:
    """Give the space of deleted rows back: SQLite rewrites the file (``VACUUM``), which
    otherwise never shrinks; PostgreSQL marks it reusable (``VACUUM ANALYZE`` of the pruned
    tables; autovacuum would do it later).

    Returns:
        Bytes the SQLite file shrank by; None on PostgreSQL.
    """
    # VACUUM cannot run inside a transaction: an autocommit connection of its own.
    with translate_errors(store.url), store.engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        if store.is_sqlite:
            before = _sqlite_bytes(conn)
            conn.execute(text("VACUUM"))
            return max(0, before - _sqlite_bytes(conn))
        for model in _PRUNED:
            conn.execute(text(f"VACUUM ANALYZE {model.__tablename__}"))
    return None


_PRUNED = (Sample, SampleRollup, CounterReset, AlertEvent)


def _sqlite_bytes(conn: Connection) -> int:
    pages = conn.execute(text("PRAGMA page_count")).scalar() or 0
    size = conn.execute(text("PRAGMA page_size")).scalar() or 0
    return int(pages) * int(size)


def rollup(
    store: Store, older_than_s: float, step_s: float = 60.0, *, now: float | None = None
) -> RetentionCounts:
    """Roll samples older than ``older_than_s`` up to one per ``step_s`` (idempotent).

    Returns:
        ``samples``: raw samples removed; ``rollups``: gauge roll-up rows written.
    """
    if older_than_s <= 0 or step_s <= 0:
        raise ConfigError("roll-up age and step must be positive (e.g. --rollup-after 2d)")
    cutoff = math.floor(((time.time() if now is None else now) - older_than_s) / step_s) * step_s
    with store.connection() as conn:
        # Series created since the last roll-up hold (nearly) only newer samples.
        low = conn.execute(select(func.min(MetricSeries.rollup_until_ts))).scalar() or 0.0
        params = {"step": step_s, "cutoff": cutoff, "low": low}
        ignore = "OR IGNORE " if conn.dialect.name == "sqlite" else ""
        conflict = "" if conn.dialect.name == "sqlite" else " ON CONFLICT DO NOTHING"
        bucket = _bucket_sql(conn, "s.ts")
        written = conn.execute(
            text(
                f"INSERT {ignore}INTO sample_rollup (series_id, ts, step_s, min, max, sum, count) "
                f"SELECT s.series_id, {bucket}, :step, MIN(s.value), MAX(s.value), SUM(s.value), "
                "COUNT(*) FROM sample s JOIN metric_series m ON m.id = s.series_id "
                f"WHERE s.ts >= :low AND s.ts < :cutoff AND NOT {_CUMULATIVE_SQL} "
                "AND s.ts >= COALESCE(m.rollup_until_ts, 0) "
                f"GROUP BY s.series_id, {bucket}{conflict}"
            ),
            params,
        ).rowcount
        removed = conn.execute(
            text(
                "DELETE FROM sample WHERE ts >= :low AND ts < :cutoff AND EXISTS ("
                "SELECT 1 FROM sample s2 WHERE s2.series_id = sample.series_id "
                f"AND s2.ts > sample.ts AND s2.ts < {_bucket_sql(conn, 'sample.ts')} + :step)"
            ),
            params,
        ).rowcount
        conn.execute(
            update(MetricSeries)
            .where(MetricSeries.rollup_until_ts.is_(None) | (MetricSeries.rollup_until_ts < cutoff))
            .values(rollup_until_ts=cutoff)
        )
    return RetentionCounts(samples=removed, rollups=written)
