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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from sqlalchemy import Connection, select
from sqlalchemy.exc import DBAPIError

from slotune.collector.errors import ConfigError
from slotune.collector.series import MetricType, is_cumulative
from slotune.collector.store._models import MetricSeries
from slotune.collector.store._records import SampleIn
from slotune.collector.store._resets import (
    NEVER,
    BatchScan,
    insert_resets,
    rederive_resets,
    scan_batch,
)
from slotune.collector.store._store import SeriesKey, Store
from slotune.collector.store._targets import ensure_target, insert_ignore, touch_targets

_TYPES = {t.value for t in MetricType}


def labels_hash(labels: Mapping[str, str]) -> str:
    """Stable hash of a label set (order-independent)."""
    text_ = json.dumps(sorted(labels.items()), separators=(",", ":"))
    return hashlib.sha1(text_.encode()).hexdigest()[:32]


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


# Labels objects the fast path may hold on to (a few hundred bytes each): enough for every
# series of a large node, while callers that build a fresh dict per sample (a spool replay)
# cannot grow it without end.
_MAX_FAST_KEYS = 50_000


def _write(conn: Connection, store: Store, batch: Sequence[SampleIn]) -> int:
    cache = store.cache
    fast = cache.by_labels_obj
    if len(fast) > _MAX_FAST_KEYS:
        fast.clear()
    series_ids: list[int] = []
    append = series_ids.append
    for s in batch:  # the one per-sample Python loop of ingest: keep it lean
        labels = s.labels
        hit = fast.get((s.target, s.name, id(labels)))
        if hit is not None and hit[1] == labels:
            append(hit[2])
        else:
            append(_series_id(conn, store, s))
    scan = scan_batch(
        series_ids, [s.ts for s in batch], [s.value for s in batch], cache.cumulative, cache.last
    )
    if conn.dialect.name == "sqlite":
        inserted = _insert_sqlite(conn, scan)
    else:
        inserted = _copy_samples(conn, scan)
    insert_resets(conn, scan.resets)
    cache.last.update(scan.last)
    for series_id, since in scan.rescan_from.items():
        cache.last[series_id] = rederive_resets(conn, series_id, since)
    newest: dict[int, float] = {}
    for series_id, ts in scan.newest.items():
        target_id = cache.target_of[series_id]
        if ts > newest.get(target_id, -math.inf):
            newest[target_id] = ts
    touch_targets(conn, newest)
    return inserted


def _series_id(conn: Connection, store: Store, s: SampleIn) -> int:
    """The id of the sample's series by its full key, remembered for the fast path."""
    cache = store.cache
    labels = s.labels
    key = (s.target, s.name, tuple(sorted(labels.items())))
    series_id = cache.ids.get(key)
    if series_id is None:
        series_id = _ensure_series(conn, store, key, s)
    cache.by_labels_obj[(s.target, s.name, id(labels))] = (labels, dict(labels), series_id)
    return series_id


def _ensure_series(conn: Connection, store: Store, key: SeriesKey, s: SampleIn) -> int:
    if s.type not in _TYPES:
        raise ConfigError(
            f"sample {s.name!r} of target {s.target!r}: type {s.type!r} is "
            f"unknown; use one of {', '.join(sorted(_TYPES))}"
        )
    target_id = ensure_target(conn, store, s.target)
    digest = labels_hash(s.labels)
    where = (
        MetricSeries.target_id == target_id,
        MetricSeries.name == s.name,
        MetricSeries.labels_hash == digest,
    )
    found = conn.execute(select(MetricSeries.id).where(*where)).scalar_one_or_none()
    is_new = found is None
    if is_new:
        conn.execute(
            insert_ignore(conn, MetricSeries).values(
                target_id=target_id,
                name=s.name,
                type=s.type,
                labels=dict(s.labels),
                labels_hash=digest,
            )
        )
    series_id: int = (
        found
        if found is not None
        else conn.execute(select(MetricSeries.id).where(*where)).scalar_one()
    )
    store.cache.ids[key] = series_id
    store.cache.target_of[series_id] = target_id
    if is_cumulative(s.type, s.name):
        store.cache.cumulative.add(series_id)
        if is_new:
            store.cache.last[series_id] = NEVER
    return series_id


def _insert_sqlite(conn: Connection, scan: BatchScan) -> int:
    # In (series, ts) order: consecutive rows land on the same B-tree leaf.
    rows = zip(scan.series.tolist(), scan.ts.tolist(), scan.value.tolist(), strict=True)
    sql = "INSERT OR IGNORE INTO sample (series_id, ts, value) VALUES (?, ?, ?)"
    with _driver(conn, sql) as driver:
        count: int = driver.executemany(sql, rows).rowcount
        return max(count, 0)


_COPY_ROW = np.dtype(
    [
        ("fields", ">i2"),
        ("len_id", ">i4"),
        ("series_id", ">i8"),
        ("len_ts", ">i4"),
        ("ts", ">f8"),
        ("len_value", ">i4"),
        ("value", ">f8"),
    ]
)
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_COPY_TRAILER = struct.pack(">h", -1)


def _copy_payload(series: np.ndarray, ts: np.ndarray, value: np.ndarray) -> bytes:
    """Rows in PostgreSQL's binary COPY format, built with NumPy rather than row by row."""
    out = np.empty(len(series), dtype=_COPY_ROW)
    out["fields"], out["len_id"], out["len_ts"], out["len_value"] = 3, 8, 8, 8
    out["series_id"], out["ts"], out["value"] = series, ts, value
    return _COPY_HEADER + out.tobytes() + _COPY_TRAILER


def _copy_samples(conn: Connection, scan: BatchScan) -> int:
    # Live scrapes are new samples: COPY them straight into the table. A replayed (spooled)
    # batch holds samples already stored, which COPY cannot skip: the savepoint rolls back
    # and the batch goes through a staging table and INSERT ... ON CONFLICT DO NOTHING.
    # Sorted by (series, ts), the rows extend each series' end of the primary-key index.
    payload = _copy_payload(scan.series, scan.ts, scan.value)
    with _driver(conn, "COPY sample") as driver:
        try:
            with (
                driver.transaction(),
                driver.cursor() as cur,
                cur.copy("COPY sample (series_id, ts, value) FROM STDIN (FORMAT BINARY)") as cp,
            ):
                cp.write(payload)
            return len(scan.series)
        except psycopg.errors.UniqueViolation:
            pass
        with driver.cursor() as cur:
            cur.execute(
                "CREATE TEMP TABLE IF NOT EXISTS sample_in (series_id bigint, "
                "ts double precision, value double precision) ON COMMIT DELETE ROWS"
            )
            with cur.copy("COPY sample_in (series_id, ts, value) FROM STDIN (FORMAT BINARY)") as cp:
                cp.write(payload)
            cur.execute(
                "INSERT INTO sample (series_id, ts, value) SELECT series_id, ts, value "
                "FROM sample_in ON CONFLICT DO NOTHING"
            )
            inserted = int(cur.rowcount)
            cur.execute("DELETE FROM sample_in")
        return max(inserted, 0)


@contextmanager
def _driver(conn: Connection, statement: str) -> Iterator[Any]:
    """The DB-API connection under ``conn`` for bulk calls SQLAlchemy would slow down.

    Its errors are raised as SQLAlchemy's, which the store turns into StoreUnavailable /
    StoreError like those of any other statement.
    """
    dbapi_error: type[Exception] = conn.dialect.loaded_dbapi.Error
    try:
        yield conn.connection.driver_connection
    except dbapi_error as e:
        raise DBAPIError.instance(statement, None, e, dbapi_error, dialect=conn.dialect) from e
