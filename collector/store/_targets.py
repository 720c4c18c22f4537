"""Targets: the endpoints and nodes that samples come from."""

from __future__ import annotations

import time
from collections.abc import Mapping

from sqlalchemy import Connection, select, update
from sqlalchemy.dialects import postgresql, sqlite

from slotune.collector.store._models import Base, Target
from slotune.collector.store._records import TargetInfo
from slotune.collector.store._store import Store

# Labels that also get a column of their own, for fleet views grouped by node/pool/model.
PROMOTED_LABELS = ("node", "pool", "model")


def insert_ignore(conn: Connection, table: type[Base]) -> sqlite.Insert | postgresql.Insert:
    """An INSERT that skips rows whose key already exists, for either dialect."""
    if conn.dialect.name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    return postgresql.insert(table).on_conflict_do_nothing()


def register_target(
    store: Store, name: str, kind: str, url: str, labels: Mapping[str, str] | None = None
) -> int:
    """Create or update the target named ``name`` (upsert by name).

    Args:
        store: the open store.
        name: unique target name, e.g. ``gpu-node-1/vllm``.
        kind: ``vllm``, ``sglang``, ``trtllm``, ``dcgm``, ``nvml``, ...
        url: what the agent scrapes (empty for in-process sources).
        labels: free labels; ``node``, ``pool`` and ``model`` are also kept as columns.

    Returns:
        The target's id.
    """
    labels = dict(labels or {})
    promoted = {k: labels.get(k) for k in PROMOTED_LABELS}
    with store.session() as session:
        row = session.scalars(select(Target).where(Target.name == name)).one_or_none()
        if row is None:
            row = Target(
                name=name, kind=kind, url=url, labels=labels, created_at=time.time(), **promoted
            )
            session.add(row)
        else:
            row.kind, row.url, row.labels = kind, url, labels
            row.node, row.pool, row.model = (promoted[k] for k in PROMOTED_LABELS)
        session.flush()
        target_id = row.id
    store.cache.targets[name] = target_id
    return target_id


def list_targets(store: Store) -> list[TargetInfo]:
    """Every registered target, by name."""
    with store.session() as session:
        rows = session.scalars(select(Target).order_by(Target.name)).all()
        return [
            TargetInfo(
                id=r.id,
                name=r.name,
                kind=r.kind,
                url=r.url,
                labels=dict(r.labels),
                node=r.node,
                pool=r.pool,
                model=r.model,
                created_at=r.created_at,
                last_seen_at=r.last_seen_at,
            )
            for r in rows
        ]


def ensure_target(conn: Connection, store: Store, name: str) -> int:
    """The id of target ``name``, registering it as kind ``unknown`` when first seen."""
    target_id = store.cache.targets.get(name)
    if target_id is not None:
        return target_id
    conn.execute(
        insert_ignore(conn, Target).values(
            name=name, kind="unknown", url="", labels={}, created_at=time.time()
        )
    )
    target_id = conn.execute(select(Target.id).where(Target.name == name)).scalar_one()
    store.cache.targets[name] = target_id
    return target_id


def touch_targets(conn: Connection, last_ts: Mapping[int, float]) -> None:
    """Advance ``last_seen_at`` of each target to its newest sample time."""
    for target_id, ts in last_ts.items():
        conn.execute(
            update(Target)
            .where(Target.id == target_id)
            .where((Target.last_seen_at.is_(None)) | (Target.last_seen_at < ts))
            .values(last_seen_at=ts)
        )
