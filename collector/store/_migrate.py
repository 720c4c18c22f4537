"""Schema revisions: Alembic driven programmatically from the installed ``migrations`` package."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect

import slotune.migrations
from slotune.collector.errors import SchemaMismatch
from slotune.collector.store._models import Base

# Optuna keeps its own ``alembic_version`` table in the same database.
VERSION_TABLE = "slotune_alembic_version"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic configuration pointing at the ``migrations`` package, wherever installed."""
    config = Config()
    config.set_main_option("script_location", str(Path(slotune.migrations.__file__).parent))
    config.set_main_option("version_table", VERSION_TABLE)
    config.attributes["target_metadata"] = Base.metadata
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest schema revision this slotune knows."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migrations package holds no revision")
    return head


def known_revisions() -> set[str]:
    script = ScriptDirectory.from_config(alembic_config())
    return {rev.revision for rev in script.walk_revisions()}


def revision_of(connection: Connection) -> str | None:
    """The revision stamped in the database (None for an unversioned database)."""
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def has_slotune_tables(connection: Connection) -> bool:
    existing = set(inspect(connection).get_table_names())
    return bool(existing & set(Base.metadata.tables))


def upgrade_connection(connection: Connection, revision: str = "head") -> None:
    command.upgrade(alembic_config(connection), revision)


def downgrade_connection(connection: Connection, revision: str) -> None:
    command.downgrade(alembic_config(connection), revision)


def check_revision(connection: Connection) -> None:
    """Refuse a schema older or newer than this slotune knows.

    Raises:
        SchemaMismatch: naming the command that fixes it.
    """
    current = revision_of(connection)
    head = head_revision()
    if current == head:
        return
    if current is None:
        what = (
            "has slotune tables but no revision"
            if has_slotune_tables(connection)
            else "is empty (no slotune schema)"
        )
        raise SchemaMismatch(
            f"the database {what}; this slotune expects revision {head}: run `slotune db upgrade`"
        )
    if current not in known_revisions():
        raise SchemaMismatch(
            f"the database schema is at revision {current}, newer than this slotune knows "
            f"({head}): upgrade slotune (pip install -U slotune)"
        )
    raise SchemaMismatch(
        f"the database schema is at revision {current}, this slotune expects {head}: "
        "run `slotune db upgrade`"
    )
