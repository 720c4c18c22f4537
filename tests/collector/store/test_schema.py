from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from slotune.collector.errors import SchemaMismatch, StoreUnavailable
from slotune.collector.store import current_revision, downgrade, open_store, schema_status, upgrade
from slotune.collector.store._migrate import VERSION_TABLE, head_revision
from slotune.collector.store._models import Base


def schema_diff(url: str) -> list[object]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={
                    "version_table": VERSION_TABLE,
                    "compare_type": True,
                    "include_name": lambda name, type_, _p: (
                        type_ != "table" or name in Base.metadata.tables
                    ),
                },
            )
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def table_names(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrations_match_the_models(store_url: str) -> None:
    upgrade(store_url)
    assert schema_diff(store_url) == []


def test_optuna_tables_live_beside_ours(store_url: str) -> None:
    upgrade(store_url)
    storage = optuna.storages.RDBStorage(store_url)
    optuna.create_study(study_name="s1", storage=storage)
    storage.remove_session()
    storage.engine.dispose()
    assert {"studies", "trials", "tuning_study", "sample"} <= table_names(store_url)
    assert schema_diff(store_url) == []
    open_store(store_url).dispose()


def test_upgrade_downgrade_round_trip(store_url: str) -> None:
    assert upgrade(store_url) == head_revision()
    assert current_revision(store_url) == head_revision()
    assert downgrade(store_url, "base") is None
    assert not table_names(store_url) & set(Base.metadata.tables)
    upgrade(store_url)
    assert schema_diff(store_url) == []
    assert upgrade(store_url) == head_revision()  # idempotent


def test_refuses_an_empty_database(store_url: str) -> None:
    if store_url.startswith("sqlite"):
        Path(store_url.removeprefix("sqlite:///")).touch()
    with pytest.raises(SchemaMismatch, match="run `slotune db upgrade`"):
        open_store(store_url)


def test_refuses_a_newer_schema(store_url: str) -> None:
    upgrade(store_url)
    _stamp(store_url, "0000")
    # an unknown revision reads as newer than this slotune
    with pytest.raises(SchemaMismatch, match="upgrade slotune"):
        open_store(store_url)
    with pytest.raises(SchemaMismatch, match="upgrade slotune"):
        upgrade(store_url)
    assert schema_status(store_url).current == "0000"


def test_refuses_a_database_behind_head(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    upgrade(store_url, "0001")
    import slotune.collector.store._migrate as migrate

    monkeypatch.setattr(migrate, "head_revision", lambda: "0002")
    monkeypatch.setattr(migrate, "known_revisions", lambda: {"0001", "0002"})
    with pytest.raises(
        SchemaMismatch,
        match="at revision 0001, this slotune expects 0002: run `slotune db upgrade`",
    ):
        open_store(store_url)


def _stamp(url: str, revision: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = :r"), {"r": revision})
    engine.dispose()


def test_default_store_is_created_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    with open_store() as store:
        assert store.url.endswith("slotune/slotune.db")
    assert (tmp_path / "slotune" / "slotune.db").exists()
    assert current_revision() == head_revision()


def test_explicit_sqlite_path_is_not_created_by_reads(sqlite_url: str) -> None:
    with pytest.raises(StoreUnavailable, match="db upgrade"):
        open_store(sqlite_url)
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()
