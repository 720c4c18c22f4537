"""Upgrading a checked-in database of an older schema keeps everything it held (Optuna's
``test_upgrade_assets``).

``tests/data/store/slotune-0006.db`` was written by slotune at schema revision 0006, where
an SLO's ``interpolate`` and alerting settings rode on the ``config`` of its alert rules:
``apply_slos(store, parse_slo_yaml(SLOS_YAML))``, the threshold rules of ``RULES_YAML`` with
``save_alert_rule``, and one firing event of ``chat-ttft:page``. On PostgreSQL the same rows
are copied into a database created at revision 0006.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData, create_engine, select

from slotune.collector.alerts import load_slos
from slotune.collector.alerts.rules import parse_rules_yaml
from slotune.collector.alerts.slo_rules import slo_rules
from slotune.collector.slo import parse_slo_yaml
from slotune.collector.store import (
    downgrade,
    list_alert_events,
    list_alert_rules,
    list_slos,
    open_store,
    slo_scrape_intervals,
    upgrade,
)
from slotune.collector.store._models import Base

OLD_DB = Path(__file__).resolve().parents[2] / "data" / "store" / "slotune-0006.db"
OLD_REVISION = "0006"
SLOS_YAML = """
slos:
  - name: chat-ttft
    spec: ttft:p99<=500ms
    selector: {model: llama-3.1-8b, pool: chat}
    description: Interactive chat must start answering within half a second.
    interpolate: true
    alerting:
      labels: {team: serving, channel: chat}
      windows:
        - {severity: page, long: 1h, short: 5m, factor: 14.4}
        - {severity: ticket, long: 1d, short: 2h, factor: 3}
  - name: batch-e2e
    spec: e2e:p99<=20s
    objective: 99.5%
    window: 7d
    selector: {pool: batch}
    alerting: {enabled: false}
  - name: errors
    spec: error_rate<=1%
"""
RULES_YAML = """
rules:
  - name: kv-full
    expr: kv_usage > 0.9 for 5m
    resolve: 0.8
    severity: page
    labels: {team: serving}
    selector: {pool: chat}
"""


def _rows(url: str, table: str) -> list[dict[str, Any]]:
    engine = create_engine(url)
    try:
        meta = MetaData()
        meta.reflect(engine, only=[table])
        t = meta.tables[table]
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(t).order_by(*t.primary_key))]
    finally:
        engine.dispose()


def _old_database(url: str) -> str:
    """``url`` holding the checked-in revision-0006 database."""
    if url.startswith("sqlite"):
        shutil.copyfile(OLD_DB, url.removeprefix("sqlite:///"))
        return url
    upgrade(url, OLD_REVISION)
    old, new = create_engine(f"sqlite:///{OLD_DB}"), create_engine(url)
    try:
        old_meta, new_meta = MetaData(), MetaData()
        old_meta.reflect(old, only=list(Base.metadata.tables))
        new_meta.reflect(new, only=list(Base.metadata.tables))
        with old.connect() as src, new.begin() as dst:
            for table in old_meta.sorted_tables:
                rows = [dict(r._mapping) for r in src.execute(select(table))]
                if rows:
                    dst.execute(new_meta.tables[table.name].insert(), rows)
    finally:
        old.dispose()
        new.dispose()
    return url


def test_upgrading_keeps_every_slo_whole_and_every_rule(store_url: str) -> None:
    url = _old_database(store_url)
    upgrade(url)
    expected = parse_slo_yaml(SLOS_YAML)
    threshold_rules = [r.to_info() for r in parse_rules_yaml(RULES_YAML)]
    with open_store(url) as store:
        assert list_slos(store) == sorted(expected, key=lambda s: s.name)
        assert load_slos(store) == {s.name: s for s in expected}
        # Applied before 0008 kept no scrape interval: the evaluator's flag (or 0) applies.
        assert slo_scrape_intervals(store) == {}
        assert list_alert_rules(store) == sorted(
            [*(r for s in expected for r in slo_rules(s)), *threshold_rules],
            key=lambda r: r.name,
        )
        [event] = list_alert_events(store)
        assert (event.rule, event.state, event.value) == ("chat-ttft:page", "firing", 20.5)


def test_downgrading_puts_the_settings_back_on_the_rules(store_url: str) -> None:
    url = _old_database(store_url)
    before = _rows(url, "alert_rule")
    upgrade(url)
    downgrade(url, OLD_REVISION)
    assert _rows(url, "alert_rule") == before
    assert {c for row in _rows(url, "slo") for c in row} == {
        c for row in _rows(f"sqlite:///{OLD_DB}", "slo") for c in row
    }
