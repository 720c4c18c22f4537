"""SLOs in the store: upserted by name, read back as ``collector.slo.SLO``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import CursorResult, delete, select

from slotune.collector.errors import ConfigError
from slotune.collector.slo import SLI, SLO, Selector
from slotune.collector.store._models import SLORow
from slotune.collector.store._store import Store


def save_slos(store: Store, slos: Sequence[SLO]) -> None:
    """Create or replace SLOs by name, all in one transaction (all or nothing)."""
    names = [s.name for s in slos]
    if len(set(names)) != len(names):
        raise ConfigError("two SLOs share a name; give each a unique name")
    now = time.time()
    with store.session() as session:
        existing = {
            r.name: r for r in session.scalars(select(SLORow).where(SLORow.name.in_(names)))
        }
        for slo in slos:
            row = existing.get(slo.name)
            if row is None:
                row = SLORow(name=slo.name, created_at=now)
                session.add(row)
            row.sli, row.threshold, row.percentile = slo.sli.value, slo.threshold, slo.percentile
            row.objective, row.window_s, row.description = (
                slo.objective,
                slo.window_s,
                slo.description,
            )
            row.selector_model = slo.selector.model
            row.selector_pool = slo.selector.pool
            row.selector_target = slo.selector.target
            row.updated_at = now


def list_slos(store: Store) -> list[SLO]:
    """Every stored SLO, by name."""
    with store.session() as session:
        return [
            SLO(
                name=r.name,
                sli=SLI(r.sli),
                threshold=r.threshold,
                percentile=r.percentile,
                objective=r.objective,
                window_s=r.window_s,
                selector=Selector(
                    model=r.selector_model, pool=r.selector_pool, target=r.selector_target
                ),
                description=r.description,
            )
            for r in session.scalars(select(SLORow).order_by(SLORow.name))
        ]


def delete_slo(store: Store, name: str) -> None:
    """Delete one SLO.

    Raises:
        ConfigError: no SLO has this name.
    """
    with store.session() as session:
        result = session.execute(delete(SLORow).where(SLORow.name == name))
        deleted = cast(CursorResult[Any], result).rowcount
    if not deleted:
        raise ConfigError(f"no SLO named {name!r}; see the names with `slotune slo list`")
