"""Batched reads for fleet views: many series at a few instants, in one statement.

``collector.store._queries`` answers one series and one window per call, which a dashboard
showing a hundred targets would call tens of thousands of times. :func:`series_at` instead
reads, for every series of the given names (and targets), the newest sample at or before
each instant of a grid with one correlated index lookup per (series, instant), plus the
counter resets between the instants. Roll-ups keep the last sample of each step, so the same
lookups work on rolled-up history and a 30-day grid costs what a 5-minute one does.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, text

from slotune.collector.errors import ConfigError
from slotune.collector.store._store import Store

MAX_GRID = 400


@dataclass(frozen=True, slots=True)
class SeriesPoints:
    """One series sampled on a grid.

    Attributes:
        target: target name.
        name: series name.
        labels: the series' labels.
        values: newest value at or before each grid instant (None: no sample yet).
        resets: for cumulative series, the sum of ``prev_value`` of the counter resets in
            (instant i-1, instant i] at index i (0.0 at index 0).
    """

    target: str
    name: str
    labels: Mapping[str, str]
    values: tuple[float | None, ...]
    resets: tuple[float, ...]


def series_at(
    store: Store,
    names: Sequence[str],
    at_ts: Sequence[float],
    targets: Sequence[str] | None = None,
    *,
    fill_first: bool = False,
) -> list[SeriesPoints]:
    """Every series named in ``names`` (of ``targets``, or of all targets) on a grid.

    Args:
        store: the open store.
        names: series names as stored (``ttft_bucket``, ``kv_usage``, ...).
        at_ts: increasing epoch seconds (at most :data:`MAX_GRID` of them).
        targets: target names; None for every target.
        fill_first: a series with no sample by the first instant gets its first sample
            inside the grid there instead, so an increase over the grid counts from the
            series' first sample as ``counter_increase`` does (a target first scraped
            inside the range).

    Returns:
        One :class:`SeriesPoints` per series, ordered by target and name.

    Raises:
        ConfigError: an empty, unordered or too long grid.
    """
    grid = list(at_ts)
    if not grid or len(grid) > MAX_GRID or any(b <= a for a, b in itertools.pairwise(grid)):
        raise ConfigError(
            f"a fleet query needs 1 to {MAX_GRID} increasing instants; got {len(grid)}"
        )
    if not names or (targets is not None and not targets):
        return []
    where = "m.name IN :names" + (" AND t.name IN :targets" if targets is not None else "")
    series_stmt = text(
        "SELECT m.id, t.name, m.name, m.labels FROM metric_series m "
        f"JOIN target t ON t.id = m.target_id WHERE {where} ORDER BY t.name, m.name, m.id"
    ).bindparams(bindparam("names", expanding=True))
    params: dict[str, object] = {"names": list(names)}
    if targets is not None:
        series_stmt = series_stmt.bindparams(bindparam("targets", expanding=True))
        params["targets"] = list(targets)
    # A VALUES list of (index, instant): one correlated index lookup per series and instant;
    # the series' labels are read once above, not with every instant.
    values_sql = ", ".join(f"({i}, :t{i})" for i in range(len(grid)))
    grid_stmt = text(
        f"WITH g(i, at) AS (VALUES {values_sql}) "
        "SELECT m.id, g.i, "
        "(SELECT s.value FROM sample s WHERE s.series_id = m.id AND s.ts <= g.at "
        "ORDER BY s.ts DESC LIMIT 1) "
        "FROM metric_series m CROSS JOIN g WHERE m.id IN :ids"
    ).bindparams(bindparam("ids", expanding=True))
    found: dict[int, tuple[str, str, dict[str, str], list[float | None]]] = {}
    with store.connection() as conn:
        for sid, target, name, labels in conn.execute(series_stmt, params):
            found[sid] = (target, name, _labels(labels), [None] * len(grid))
        if not found:
            return []
        grid_params: dict[str, object] = {f"t{i}": float(t) for i, t in enumerate(grid)}
        grid_params["ids"] = list(found)
        for sid, i, value in conn.execute(grid_stmt, grid_params):
            found[sid][3][i] = None if value is None else float(value)
        if fill_first and len(grid) > 1:
            late = [sid for sid, entry in found.items() if entry[3][0] is None]
            for sid, value in _first_samples(conn, late, grid[0], grid[-1]):
                found[sid][3][0] = float(value)
        resets = _resets(conn, list(found), grid)
    return [
        SeriesPoints(target, name, labels, tuple(values), resets.get(sid, (0.0,) * len(grid)))
        for sid, (target, name, labels, values) in found.items()
    ]


def _labels(raw: Any) -> dict[str, str]:
    if isinstance(raw, str):  # a text() query hands the JSON column through as text
        raw = json.loads(raw)
    return {str(k): str(v) for k, v in (raw or {}).items()}


def _first_samples(
    conn: Connection, series_ids: list[int], start: float, end: float
) -> list[tuple[int, float]]:
    if not series_ids:
        return []
    rows = conn.execute(
        text(
            "SELECT m.id, (SELECT s.value FROM sample s WHERE s.series_id = m.id "
            "AND s.ts > :a AND s.ts <= :b ORDER BY s.ts LIMIT 1) "
            "FROM metric_series m WHERE m.id IN :ids"
        ).bindparams(bindparam("ids", expanding=True)),
        {"ids": series_ids, "a": start, "b": end},
    ).all()
    return [(sid, value) for sid, value in rows if value is not None]


def _resets(
    conn: Connection, series_ids: list[int], grid: list[float]
) -> dict[int, tuple[float, ...]]:
    if not series_ids or len(grid) < 2:
        return {}
    rows = conn.execute(
        text(
            "SELECT series_id, ts, prev_value FROM counter_reset "
            "WHERE series_id IN :ids AND ts > :a AND ts <= :b"
        ).bindparams(bindparam("ids", expanding=True)),
        {"ids": series_ids, "a": grid[0], "b": grid[-1]},
    ).all()
    out: dict[int, list[float]] = {}
    for sid, ts, prev in rows:
        slot = next(i for i in range(1, len(grid)) if ts <= grid[i])
        out.setdefault(sid, [0.0] * len(grid))[slot] += float(prev)
    return {sid: tuple(v) for sid, v in out.items()}
