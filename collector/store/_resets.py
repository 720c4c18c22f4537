"""Counter resets: found per batch with NumPy, re-derived from the database for replays.

A batch is sorted by (series, time) once; each sample's predecessor is then the sample before
it, or for the first sample of a series the last value the writer remembers. A series whose
batch does not simply continue what the writer remembers (a replayed spool, a duplicate
timestamp, a series this writer has not seen yet) is re-derived from the database after the
insert instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, delete, text

from slotune.collector.errors import ConfigError
from slotune.collector.store._models import CounterReset
from slotune.collector.store._targets import insert_ignore

# What the writer remembers of a series: (ts, value) of its newest sample.
Last = tuple[float, float]
NEVER: Last = (-math.inf, -math.inf)  # a series created by this writer: nothing before it
_UNKNOWN: Last = (math.inf, math.nan)  # compares as "replayed": forces a re-derivation


@dataclass(frozen=True)
class BatchScan:
    """A batch sorted by (series, ts), with what it changes in the writer's memory.

    Attributes:
        series: series id of each sample, sorted.
        ts: timestamps in the same order.
        value: values in the same order.
        newest: newest timestamp of each series of the batch.
        resets: ``(series_id, ts, prev_value)`` of each drop of a tracked cumulative series.
        rescan_from: cumulative series to re-derive from the database, from this time on.
        last: the new newest sample of each tracked cumulative series.
    """

    series: np.ndarray
    ts: np.ndarray
    value: np.ndarray
    newest: dict[int, float]
    resets: list[tuple[int, float, float]]
    rescan_from: dict[int, float]
    last: dict[int, Last]


def scan_batch(
    series_ids: Sequence[int],
    ts_list: Sequence[float],
    value_list: Sequence[float],
    cumulative: set[int],
    last_of: Mapping[int, Last],
) -> BatchScan:
    """Sort a batch and find its counter resets without a per-sample Python loop.

    Raises:
        ConfigError: a timestamp is not finite.
    """
    ts_in = np.asarray(ts_list, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(ts_in))
    if bad.size:
        raise ConfigError(
            f"sample timestamp {ts_in[bad[0]]!r} is not a finite epoch time in seconds"
        )
    order = np.lexsort((ts_in, np.asarray(series_ids, dtype=np.int64)))
    series = np.asarray(series_ids, dtype=np.int64)[order]
    ts, value = ts_in[order], np.asarray(value_list, dtype=np.float64)[order]
    n = len(series)
    starts_series = np.empty(n, dtype=bool)
    starts_series[0] = True
    np.not_equal(series[1:], series[:-1], out=starts_series[1:])
    first = np.flatnonzero(starts_series)
    final = np.append(first[1:], n) - 1
    group_of = np.cumsum(starts_series) - 1
    ids = series[first].tolist()

    is_cum = np.fromiter((u in cumulative for u in ids), dtype=bool, count=len(ids))
    remembered = np.array([last_of.get(u, _UNKNOWN) for u in ids], dtype=np.float64).reshape(-1, 2)
    # Sorted, a repeated timestamp is the only way a series can go "backwards" in a batch.
    repeated = ~starts_series[1:] & (ts[1:] <= ts[:-1])
    has_repeat = np.bincount(group_of[1:][repeated], minlength=len(ids)) > 0
    rescan = is_cum & ((ts[first] <= remembered[:, 0]) | has_repeat)
    tracked = is_cum & ~rescan

    prev_value = np.empty(n)
    prev_value[1:] = value[:-1]
    prev_value[first] = remembered[:, 1]
    drops = np.flatnonzero((value < prev_value) & tracked[group_of])
    return BatchScan(
        series=series,
        ts=ts,
        value=value,
        newest=dict(zip(ids, ts[final].tolist(), strict=True)),
        resets=list(
            zip(series[drops].tolist(), ts[drops].tolist(), prev_value[drops].tolist(), strict=True)
        ),
        rescan_from=dict(
            zip(series[first][rescan].tolist(), ts[first][rescan].tolist(), strict=True)
        ),
        last=dict(
            zip(
                series[final][tracked].tolist(),
                zip(ts[final][tracked].tolist(), value[final][tracked].tolist(), strict=True),
                strict=True,
            )
        ),
    )


def insert_resets(conn: Connection, resets: Sequence[tuple[int, float, float]]) -> None:
    """Store resets; one already stored is left as it is."""
    if resets:
        conn.execute(
            insert_ignore(conn, CounterReset),
            [{"series_id": s, "ts": t, "prev_value": p} for s, t, p in resets],
        )


def rederive_resets(conn: Connection, series_id: int, since_ts: float) -> Last:
    """Recompute the resets of one series from ``since_ts`` on; returns its last sample."""
    prev = conn.execute(
        text(
            "SELECT ts, value FROM sample WHERE series_id = :s AND ts < :t ORDER BY ts DESC LIMIT 1"
        ),
        {"s": series_id, "t": since_ts},
    ).first()
    points = conn.execute(
        text("SELECT ts, value FROM sample WHERE series_id = :s AND ts >= :t ORDER BY ts"),
        {"s": series_id, "t": since_ts},
    ).all()
    conn.execute(
        delete(CounterReset).where(CounterReset.series_id == series_id, CounterReset.ts >= since_ts)
    )
    last = (float(prev[0]), float(prev[1])) if prev is not None else NEVER
    resets = []
    for ts, value in points:
        if value < last[1]:
            resets.append((series_id, float(ts), last[1]))
        last = (float(ts), float(value))
    insert_resets(conn, resets)
    return last
