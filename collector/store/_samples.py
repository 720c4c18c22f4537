"""Writing samples: batched, idempotent, with counter resets recorded as they arrive.

Cumulative series (counters, histogram ``_bucket/_sum/_count``, summary ``_sum/_count``) get a
``counter_reset`` row whenever a value drops below the previous one, so window queries read
two samples per series instead of scanning the window. The writer keeps each series' last
value in memory; a sample older than that (a replayed spool) re-derives the resets of the
series from the database.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import psycopg
from sqlalchemy import Connection, delete, select, text

from collector.errors import ConfigError
from collector.store._models import CounterReset, MetricSeries
from collector.store._records import MetricType, SampleIn
from collector.store._store import SeriesKey, Store
from collector.store._targets import ensure_target, insert_ignore, touch_targets

_TYPES = {t.value for t in MetricType}
_CUMULATIVE_SUFFIXES = ("_bucket", "_sum", "_count")
_NEVER = (-math.inf, -math.inf)


def labels_hash(labels: Mapping[str, str]) -> str:
    """Stable hash of a label set (order-independent)."""
    text_ = json.dumps(sorted(labels.items()), separators=(",", ":"))
    return hashlib.sha1(text_.encode()).hexdigest()[:32]


def is_cumulative(name: str, type_: str) -> bool:
    """Whether a series only grows between resets (Prometheus counter semantics)."""
    if type_ == MetricType.COUNTER:
        return True
    return type_ in (MetricType.HISTOGRAM, MetricType.SUMMARY) and name.endswith(
        _CUMULATIVE_SUFFIXES)


def write_samples(store: Store, batch: Sequence[SampleIn]) -> int:
    """Store a batch of samples in one transaction; re-sent samples are ignored.

    Unknown targets are registered (kind ``unknown``) and unknown series created.

    Args:
        store: the open store.
        batch: samples of any targets and series, in any order.

    Returns:
        How many samples were new.

    Raises:
        ConfigError: a sample has an unknown type or a non-finite timestamp.
        StoreUnavailable: the database cannot be written (nothing of the batch is stored).
    """
    if not batch:
        return 0
    try:
        with store.connection() as conn:
            return _write(conn, store, batch)
    except BaseException:
        # The transaction rolled back: what the cache learnt may not exist in the database.
        store.cache.clear()
        raise


def _write(conn: Connection, store: Store, batch: Sequence[SampleIn]) -> int:
    cache = store.cache
    ids, cumulative, last_of = cache.ids, cache.cumulative, cache.last
    rows: list[tuple[int, float, float]] = []
    resets: list[dict[str, float]] = []
    rescan_from: dict[int, float] = {}
    newest: dict[str, float] = {}
    for s in batch:  # the hot loop of ingest: keep it lean
        key = (s.target, s.name, tuple(sorted(s.labels.items())))
        series_id = ids.get(key)
        if series_id is None:
            series_id = _ensure_series(conn, store, key, s)
        ts, value = s.ts, s.value
        rows.append((series_id, ts, value))
        if ts > newest.get(s.target, -math.inf):
            newest[s.target] = ts
        if series_id not in cumulative:
            continue
        last = last_of.get(series_id)
        if last is None or series_id in rescan_from or ts <= last[0]:
            rescan_from[series_id] = min(rescan_from.get(series_id, math.inf), ts)
            continue
        if value < last[1]:
            resets.append({"series_id": series_id, "ts": ts, "prev_value": last[1]})
        last_of[series_id] = (ts, value)
    inserted = _insert_samples(conn, rows)
    if resets:
        conn.execute(insert_ignore(conn, CounterReset), resets)
    for series_id, since in rescan_from.items():
        last_of[series_id] = rederive_resets(conn, series_id, since)
    touch_targets(conn, {cache.targets[t]: ts for t, ts in newest.items()})
    return inserted


def _ensure_series(conn: Connection, store: Store, key: SeriesKey, s: SampleIn) -> int:
    if s.type not in _TYPES:
        raise ConfigError(f"sample {s.name!r} of target {s.target!r}: type {s.type!r} is "
                          f"unknown; use one of {', '.join(sorted(_TYPES))}")
    target_id = ensure_target(conn, store, s.target)
    digest = labels_hash(s.labels)
    where = (MetricSeries.target_id == target_id, MetricSeries.name == s.name,
             MetricSeries.labels_hash == digest)
    found = conn.execute(select(MetricSeries.id).where(*where)).scalar_one_or_none()
    is_new = found is None
    if is_new:
        conn.execute(insert_ignore(conn, MetricSeries).values(
            target_id=target_id, name=s.name, type=s.type, labels=dict(s.labels),
            labels_hash=digest))
    series_id: int = found if found is not None else conn.execute(
        select(MetricSeries.id).where(*where)).scalar_one()
    store.cache.ids[key] = series_id
    if is_cumulative(s.name, s.type):
        store.cache.cumulative.add(series_id)
        if is_new:
            store.cache.last[series_id] = _NEVER
    return series_id


def _insert_samples(conn: Connection, rows: list[tuple[int, float, float]]) -> int:
    for _, ts, _ in rows:
        if not math.isfinite(ts):
            raise ConfigError(f"sample timestamp {ts!r} is not a finite epoch time in seconds")
    if conn.dialect.name == "sqlite":
        result = conn.exec_driver_sql(
            "INSERT OR IGNORE INTO sample (series_id, ts, value) VALUES (?, ?, ?)", rows)
        return max(result.rowcount, 0)
    return _copy_samples(conn, rows)


_COPY_ROW = np.dtype([("fields", ">i2"), ("len_id", ">i4"), ("series_id", ">i8"),
                      ("len_ts", ">i4"), ("ts", ">f8"), ("len_value", ">i4"), ("value", ">f8")])
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_COPY_TRAILER = struct.pack(">h", -1)


def _copy_payload(rows: list[tuple[int, float, float]]) -> bytes:
    """Rows in PostgreSQL's binary COPY format, built with NumPy rather than row by row."""
    columns = np.array(rows, dtype=np.float64).reshape(-1, 3)
    out = np.empty(len(rows), dtype=_COPY_ROW)
    out["fields"], out["len_id"], out["len_ts"], out["len_value"] = 3, 8, 8, 8
    out["series_id"] = columns[:, 0]
    out["ts"], out["value"] = columns[:, 1], columns[:, 2]
    return _COPY_HEADER + out.tobytes() + _COPY_TRAILER


def _copy_samples(conn: Connection, rows: list[tuple[int, float, float]]) -> int:
    # Live scrapes are new samples: COPY them straight into the table. A replayed (spooled)
    # batch holds samples already stored, which COPY cannot skip: the savepoint rolls back
    # and the batch goes through a staging table and INSERT ... ON CONFLICT DO NOTHING.
    payload = _copy_payload(rows)
    driver: Any = conn.connection.driver_connection
    try:
        with driver.transaction(), driver.cursor() as cur, \
                cur.copy("COPY sample (series_id, ts, value) FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(payload)
        return len(rows)
    except psycopg.errors.UniqueViolation:
        pass
    with driver.cursor() as cur:
        cur.execute("CREATE TEMP TABLE IF NOT EXISTS sample_in (series_id bigint, "
                    "ts double precision, value double precision) ON COMMIT DELETE ROWS")
        with cur.copy("COPY sample_in (series_id, ts, value) FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(payload)
        cur.execute("INSERT INTO sample (series_id, ts, value) SELECT series_id, ts, value "
                    "FROM sample_in ON CONFLICT DO NOTHING")
        inserted = int(cur.rowcount)
        cur.execute("DELETE FROM sample_in")
    return max(inserted, 0)


def rederive_resets(conn: Connection, series_id: int, since_ts: float) -> tuple[float, float]:
    """Recompute the resets of one series from ``since_ts`` on; returns its last sample."""
    prev = conn.execute(
        text("SELECT ts, value FROM sample WHERE series_id = :s AND ts < :t "
             "ORDER BY ts DESC LIMIT 1"), {"s": series_id, "t": since_ts}).first()
    points = conn.execute(
        text("SELECT ts, value FROM sample WHERE series_id = :s AND ts >= :t ORDER BY ts"),
        {"s": series_id, "t": since_ts}).all()
    conn.execute(delete(CounterReset).where(CounterReset.series_id == series_id,
                                            CounterReset.ts >= since_ts))
    last = (float(prev[0]), float(prev[1])) if prev is not None else _NEVER
    resets = []
    for ts, value in points:
        if value < last[1]:
            resets.append({"series_id": series_id, "ts": ts, "prev_value": last[1]})
        last = (float(ts), float(value))
    if resets:
        conn.execute(insert_ignore(conn, CounterReset), resets)
    return last
