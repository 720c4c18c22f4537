"""SLOs in the store: upserted by name, read back whole as ``collector.slo.SLO``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, cast

from sqlalchemy import CursorResult, delete, select

from slotune.collector.errors import ConfigError
from slotune.collector.slo import SLI, SLO, Alerting, BurnWindow, Selector
from slotune.collector.store._models import SLORow
from slotune.collector.store._store import Store


def save_slos(store: Store, slos: Sequence[SLO], *, scrape_interval_s: float | None = None) -> None:
    """Create or replace SLOs by name, all in one transaction (all or nothing), with the
    scrape interval they were applied for (None: not given)."""
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
            _fill(row, slo)
            row.scrape_interval_s = scrape_interval_s
            row.updated_at = now


def _fill(row: SLORow, slo: SLO) -> None:
    row.sli, row.threshold, row.percentile = slo.sli.value, slo.threshold, slo.percentile
    row.objective, row.window_s, row.description = slo.objective, slo.window_s, slo.description
    row.selector_model = slo.selector.model
    row.selector_pool = slo.selector.pool
    row.selector_target = slo.selector.target
    row.interpolate = slo.interpolate
    row.alerting_enabled = slo.alerting.enabled
    row.alerting_windows = [asdict(w) for w in slo.alerting.windows]
    row.alerting_labels = dict(slo.alerting.labels)


def list_slos(store: Store) -> list[SLO]:
    """Every stored SLO, by name."""
    with store.session() as session:
        return [_slo(r) for r in session.scalars(select(SLORow).order_by(SLORow.name))]


def slo_scrape_intervals(store: Store) -> dict[str, float]:
    """The scrape interval each SLO was applied for, by SLO name (those given one)."""
    with store.session() as session:
        rows = session.execute(select(SLORow.name, SLORow.scrape_interval_s)).all()
    return {name: s for name, s in rows if s is not None}


def _slo(row: SLORow) -> SLO:
    return SLO(
        name=row.name,
        sli=SLI(row.sli),
        threshold=row.threshold,
        percentile=row.percentile,
        objective=row.objective,
        window_s=row.window_s,
        selector=Selector(
            model=row.selector_model, pool=row.selector_pool, target=row.selector_target
        ),
        description=row.description,
        interpolate=row.interpolate,
        alerting=Alerting(
            enabled=row.alerting_enabled,
            windows=tuple(BurnWindow(**w) for w in row.alerting_windows),
            labels=dict(row.alerting_labels),
        ),
    )


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
