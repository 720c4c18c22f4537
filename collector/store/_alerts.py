"""Batched window reads for the alert evaluator; alert silences, acks, history and the
delivery outbox.

The evaluator asks the same questions of many series at once (every ``ttft_bucket`` of 50
targets at 8 window edges), so these functions take a set of series ids and answer in one
statement per time: the value at or before a time is a correlated ``LIMIT 1`` sub-select per
series, an index seek on ``sample``'s primary key in both SQLite and PostgreSQL. Increases
follow :func:`collector.store._queries.series_increase` exactly (same edges, same resets).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, Text, bindparam, cast, func, select, text

from slotune.collector.errors import ConfigError
from slotune.collector.store._models import (
    AlertAck,
    AlertDelivery,
    AlertEvent,
    AlertRule,
    AlertSilence,
    MetricSeries,
    Target,
)
from slotune.collector.store._records import AlertEventInfo, AlertState
from slotune.collector.store._store import Store

# SQLite builds before 3.32 allow 999 bound parameters per statement.
_CHUNK = 900

_AT_OR_BEFORE = text(
    "SELECT m.id, "
    "(SELECT s.ts FROM sample s WHERE s.series_id = m.id AND s.ts <= :t "
    "ORDER BY s.ts DESC LIMIT 1), "
    "(SELECT s.value FROM sample s WHERE s.series_id = m.id AND s.ts <= :t "
    "ORDER BY s.ts DESC LIMIT 1) "
    "FROM metric_series m WHERE m.id IN :ids"
).bindparams(bindparam("ids", expanding=True))
_FIRST_IN = text(
    "SELECT m.id, "
    "(SELECT s.ts FROM sample s WHERE s.series_id = m.id AND s.ts > :a AND s.ts <= :b "
    "ORDER BY s.ts LIMIT 1), "
    "(SELECT s.value FROM sample s WHERE s.series_id = m.id AND s.ts > :a AND s.ts <= :b "
    "ORDER BY s.ts LIMIT 1) "
    "FROM metric_series m WHERE m.id IN :ids"
).bindparams(bindparam("ids", expanding=True))
_RESETS_IN = text(
    "SELECT series_id, ts, prev_value FROM counter_reset "
    "WHERE series_id IN :ids AND ts > :a AND ts <= :b"
).bindparams(bindparam("ids", expanding=True))
_RAW_STATS = text(
    "SELECT series_id, MIN(value), MAX(value), SUM(value), COUNT(*) FROM sample "
    "WHERE series_id IN :ids AND ts >= :a AND ts <= :b GROUP BY series_id"
).bindparams(bindparam("ids", expanding=True))
_ROLLUP_STATS = text(
    "SELECT series_id, MIN(min), MAX(max), SUM(sum), SUM(count) FROM sample_rollup "
    "WHERE series_id IN :ids AND ts >= :a AND ts < :b GROUP BY series_id"
).bindparams(bindparam("ids", expanding=True))

Point = tuple[float, float]  # (ts, value)


@dataclass(frozen=True, slots=True)
class SeriesRef:
    """A stored series with its target's name, pool and model.

    Attributes:
        id: the series id.
        target: target name.
        pool: the target's pool (None when not labelled).
        model: the target's model (None when not labelled).
        name: series name, e.g. ``ttft_bucket``.
        labels: the series' labels.
        rollup_until_ts: samples before this time were rolled up (-inf: all raw).
    """

    id: int
    target: str
    pool: str | None
    model: str | None
    name: str
    labels: Mapping[str, str]
    rollup_until_ts: float


@dataclass(frozen=True, slots=True)
class GaugeStats:
    """Minimum, maximum, mean and count of a gauge's samples in a window."""

    min: float
    max: float
    mean: float
    count: int


def find_series(store: Store, names: Iterable[str]) -> list[SeriesRef]:
    """Every stored series named one of ``names``, of every target."""
    wanted = sorted(set(names))
    if not wanted:
        return []
    query = (
        select(
            MetricSeries.id,
            Target.name,
            Target.pool,
            Target.model,
            MetricSeries.name,
            MetricSeries.labels,
            MetricSeries.rollup_until_ts,
        )
        .join(Target, Target.id == MetricSeries.target_id)
        .where(MetricSeries.name.in_(wanted))
    )
    with store.connection() as conn:
        return [
            SeriesRef(
                sid, target, pool, model, name, dict(labels), -float("inf") if h is None else h
            )
            for sid, target, pool, model, name, labels, h in conn.execute(query)
        ]


def _chunks(ids: Sequence[int]) -> Iterator[list[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield list(ids[i : i + _CHUNK])


def _points(conn: Connection, query: Any, ids: Sequence[int], **params: float) -> dict[int, Point]:
    out: dict[int, Point] = {}
    for chunk in _chunks(ids):
        for sid, ts, value in conn.execute(query, {"ids": chunk, **params}):
            if ts is not None:
                out[int(sid)] = (float(ts), float(value))
    return out


def _points_on_grid(
    conn: Connection, ids: Sequence[int], instants: Sequence[float]
) -> list[dict[int, Point]]:
    """The newest (ts, value) at or before each instant, of each series: one statement per
    chunk of series, a correlated index seek per (series, instant)."""
    values_sql = ", ".join(f"({i}, :t{i})" for i in range(len(instants)))
    stmt = text(
        f"WITH g(i, at) AS (VALUES {values_sql}) SELECT m.id, g.i, "
        "(SELECT s.ts FROM sample s WHERE s.series_id = m.id AND s.ts <= g.at "
        "ORDER BY s.ts DESC LIMIT 1), "
        "(SELECT s.value FROM sample s WHERE s.series_id = m.id AND s.ts <= g.at "
        "ORDER BY s.ts DESC LIMIT 1) "
        "FROM metric_series m CROSS JOIN g WHERE m.id IN :ids"
    ).bindparams(bindparam("ids", expanding=True))
    params: dict[str, Any] = {f"t{i}": float(t) for i, t in enumerate(instants)}
    out: list[dict[int, Point]] = [{} for _ in instants]
    for chunk in _chunks(ids):
        for sid, i, ts, value in conn.execute(stmt, {**params, "ids": chunk}):
            if ts is not None:
                out[int(i)][int(sid)] = (float(ts), float(value))
    return out


def values_at(store: Store, ids: Sequence[int], at_ts: float) -> dict[int, Point]:
    """The newest (ts, value) at or before ``at_ts`` of each series that has one."""
    with store.connection() as conn:
        return _points(conn, _AT_OR_BEFORE, ids, t=at_ts)


def increases(
    store: Store, ids: Sequence[int], end_ts: float, starts: Sequence[float]
) -> dict[int, list[float | None]]:
    """Reset-aware increases of cumulative series over ``(start, end_ts]`` for each start.

    Args:
        store: the open store.
        ids: series ids (counters or histogram buckets).
        end_ts: the common window end.
        starts: window starts, each before ``end_ts``.

    Returns:
        Per series id, one increase per start (None where the series has no sample).
    """
    out: dict[int, list[float | None]] = {sid: [None] * len(starts) for sid in ids}
    if not ids or not starts:
        return out
    with store.connection() as conn:
        grid = _points_on_grid(conn, ids, [end_ts, *starts])
        last = grid[0]
        have = [sid for sid in ids if sid in last]
        bases: list[dict[int, Point]] = []
        for start, base in zip(starts, grid[1:], strict=True):
            missing = [sid for sid in have if sid not in base]
            if missing:  # born inside the window: from its first sample, like series_increase
                base.update(_points(conn, _FIRST_IN, missing, a=start, b=end_ts))
            bases.append(base)
        earliest = min((p[0] for base in bases for p in base.values()), default=end_ts)
        resets: dict[int, list[Point]] = {}
        for chunk in _chunks(have):
            rows = conn.execute(_RESETS_IN, {"ids": chunk, "a": earliest, "b": end_ts})
            for sid, ts, prev in rows:
                resets.setdefault(int(sid), []).append((float(ts), float(prev)))
    for sid in have:
        last_ts, last_value = last[sid]
        for i, base in enumerate(bases):
            point = base.get(sid)
            if point is None:
                continue
            if last_ts <= point[0]:
                out[sid][i] = 0.0
                continue
            dropped = sum(p for ts, p in resets.get(sid, ()) if point[0] < ts <= last_ts)
            out[sid][i] = last_value - point[1] + dropped
    return out


def gauge_stats(
    store: Store, refs: Sequence[SeriesRef], start_ts: float, end_ts: float
) -> dict[int, GaugeStats]:
    """Min / max / mean of each gauge series over ``[start_ts, end_ts]``, rolled-up time
    included (from the roll-ups' min, max, sum and count)."""
    acc: dict[int, list[float]] = {}

    def add(rows: Iterable[Any]) -> None:
        for sid, lo, hi, total, n in rows:
            if not n:
                continue
            a = acc.get(int(sid))
            if a is None:
                acc[int(sid)] = [float(lo), float(hi), float(total), float(n)]
            else:
                a[0], a[1] = min(a[0], float(lo)), max(a[1], float(hi))
                a[2], a[3] = a[2] + float(total), a[3] + float(n)

    # Like gauge_avg: raw samples from the roll-up horizon on, roll-ups before it.
    raw_from: dict[float, list[int]] = {}
    for r in refs:
        raw_from.setdefault(max(start_ts, r.rollup_until_ts), []).append(r.id)
    rolled = [r.id for r in refs if r.rollup_until_ts > start_ts]
    with store.connection() as conn:
        for a, ids in raw_from.items():
            for chunk in _chunks(ids):
                add(conn.execute(_RAW_STATS, {"ids": chunk, "a": a, "b": end_ts}))
        for chunk in _chunks(rolled):
            rows = conn.execute(_ROLLUP_STATS, {"ids": chunk, "a": start_ts, "b": end_ts})
            add(rows)
    return {sid: GaugeStats(a[0], a[1], a[2] / a[3], int(a[3])) for sid, a in acc.items()}


# --- silences, acks, history ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SilenceInfo:
    """Notifications of ``rule`` held back until ``until_ts``."""

    rule: str
    until_ts: float
    comment: str


@dataclass(frozen=True, slots=True)
class AlertHistoryEntry:
    """A stored alert event with its id and acknowledgement."""

    id: int
    event: AlertEventInfo
    acked_at: float | None = None
    ack_comment: str = ""


def _rule_id(store: Store, rule: str) -> int:
    with store.session() as session:
        rule_id = session.scalar(select(AlertRule.id).where(AlertRule.name == rule))
    if rule_id is None:
        raise ConfigError(f"no alert rule named {rule!r}; see the names with `slotune alerts list`")
    return rule_id


def silence_rule(store: Store, rule: str, until_ts: float, comment: str = "") -> None:
    """Hold back the notifications of ``rule`` until ``until_ts``.

    Raises:
        ConfigError: the rule is unknown.
    """
    _rule_id(store, rule)
    with store.session() as session:
        session.add(
            AlertSilence(rule=rule, until_ts=until_ts, comment=comment, created_at=time.time())
        )


def active_silences(store: Store, at_ts: float) -> dict[str, SilenceInfo]:
    """The silence lasting longest of each rule silenced at ``at_ts``."""
    query = (
        select(AlertSilence).where(AlertSilence.until_ts > at_ts).order_by(AlertSilence.until_ts)
    )
    with store.session() as session:
        return {r.rule: SilenceInfo(r.rule, r.until_ts, r.comment) for r in session.scalars(query)}


def ack_event(store: Store, event_id: int, comment: str = "") -> None:
    """Acknowledge a stored event (acknowledging twice keeps the first).

    Raises:
        ConfigError: no event has this id.
    """
    with store.session() as session:
        if session.get(AlertEvent, event_id) is None:
            raise ConfigError(
                f"no alert event with id {event_id}; see the ids with `slotune alerts history`"
            )
        if session.get(AlertAck, event_id) is None:
            session.add(AlertAck(event_id=event_id, ts=time.time(), comment=comment))


# (event, rule name, ack time, ack comment); the ack columns are NULL without an ack
_History = Select[AlertEvent, str, float, str]


def _history_query() -> _History:
    return (
        select(AlertEvent, AlertRule.name, AlertAck.ts, AlertAck.comment)
        .join(AlertRule, AlertRule.id == AlertEvent.rule_id)
        .outerjoin(AlertAck, AlertAck.event_id == AlertEvent.id)
    )


def _entries(store: Store, query: _History) -> list[AlertHistoryEntry]:
    with store.session() as session:
        return [
            AlertHistoryEntry(
                id=e.id,
                event=AlertEventInfo(
                    rule=name,
                    state=AlertState(e.state),
                    ts=e.ts,
                    value=e.value,
                    labels=dict(e.labels),
                    message=e.message,
                ),
                acked_at=acked,
                ack_comment=comment or "",
            )
            for e, name, acked, comment in session.execute(query)
        ]


def alert_history(
    store: Store, rule: str | None = None, since_ts: float | None = None, limit: int = 1000
) -> list[AlertHistoryEntry]:
    """Stored alert events with ids and acks, newest last (the newest ``limit``)."""
    query = _history_query().order_by(AlertEvent.ts.desc(), AlertEvent.id.desc()).limit(limit)
    if rule is not None:
        query = query.where(AlertRule.name == rule)
    if since_ts is not None:
        query = query.where(AlertEvent.ts >= since_ts)
    return _entries(store, query)[::-1]


def last_alert_events(
    store: Store,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], AlertHistoryEntry]:
    """The newest stored event of each (rule, label set): what each alert instance is now."""
    newest = (
        select(func.max(AlertEvent.id))
        .group_by(AlertEvent.rule_id, cast(AlertEvent.labels, Text))
        .scalar_subquery()
    )
    query = _history_query().where(AlertEvent.id.in_(newest)).order_by(AlertEvent.id)
    return {
        (e.event.rule, tuple(sorted(e.event.labels.items()))): e for e in _entries(store, query)
    }


# --- the delivery outbox ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PendingDelivery:
    """A stored event that a receiver has not confirmed yet.

    Attributes:
        event_id: the event's id.
        kind: its rule's kind (``slo_burn``, ``threshold``).
        event: the event.
    """

    event_id: int
    kind: str
    event: AlertEventInfo


def pending_deliveries(store: Store, receiver: str, limit: int = 500) -> list[PendingDelivery]:
    """The oldest ``limit`` events pending for ``receiver``, oldest first."""
    query = (
        select(AlertEvent, AlertRule.name, AlertRule.kind)
        .join(AlertDelivery, AlertDelivery.event_id == AlertEvent.id)
        .join(AlertRule, AlertRule.id == AlertEvent.rule_id)
        .where(AlertDelivery.receiver == receiver, AlertDelivery.delivered_at.is_(None))
        .order_by(AlertEvent.id)
        .limit(limit)
    )
    with store.session() as session:
        return [
            PendingDelivery(
                e.id,
                kind,
                AlertEventInfo(name, AlertState(e.state), e.ts, e.value, dict(e.labels), e.message),
            )
            for e, name, kind in session.execute(query)
        ]


def delivery_times(store: Store, receiver: str, event_ids: Iterable[int]) -> dict[int, float]:
    """When ``receiver`` last confirmed each of the events it has confirmed."""
    ids = sorted(set(event_ids))
    out: dict[int, float] = {}
    with store.session() as session:
        for chunk in _chunks(ids):
            query = select(AlertDelivery.event_id, AlertDelivery.delivered_at).where(
                AlertDelivery.receiver == receiver,
                AlertDelivery.event_id.in_(chunk),
                AlertDelivery.delivered_at.is_not(None),
            )
            out.update({eid: at for eid, at in session.execute(query) if at is not None})
    return out


def mark_delivered(store: Store, receiver: str, event_ids: Iterable[int], at_ts: float) -> None:
    """Record that ``receiver`` confirmed the events at ``at_ts`` (pending or sent before)."""
    ids = sorted(set(event_ids))
    with store.session() as session:
        for chunk in _chunks(ids):
            query = select(AlertDelivery).where(
                AlertDelivery.receiver == receiver, AlertDelivery.event_id.in_(chunk)
            )
            rows = {row.event_id: row for row in session.scalars(query)}
            for eid in chunk:
                row = rows.get(eid)
                if row is None:
                    session.add(AlertDelivery(event_id=eid, receiver=receiver, delivered_at=at_ts))
                else:
                    row.delivered_at = at_ts


def delete_alert_rules(store: Store, names: Iterable[str]) -> int:
    """Delete alert rules (and their events) by name; returns how many existed."""
    wanted = list(names)
    if not wanted:
        return 0
    with store.session() as session:
        rows = session.scalars(select(AlertRule).where(AlertRule.name.in_(wanted))).all()
        for row in rows:
            session.delete(row)
        return len(rows)
