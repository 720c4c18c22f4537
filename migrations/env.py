"""Alembic environment: runs on the connection slotune hands over, or on ``sqlalchemy.url``.

The store hands over its models' metadata too (``config.attributes["target_metadata"]``), so
the revisions never import the store that runs them; without it (a bare ``alembic upgrade``)
the revisions run all the same, and only comparing the schema with the models needs it.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import MetaData, create_engine

config = context.config
target_metadata: MetaData | None = config.attributes.get("target_metadata")
VERSION_TABLE = config.get_main_option("version_table") or "slotune_alembic_version"


def include_name(name: str | None, type_: str, _parent: Any) -> bool:
    # Optuna creates and migrates its own tables in the same database: compare ours only.
    if type_ == "table" and target_metadata is not None:
        return name in target_metadata.tables
    return True


def _configure(connection: Any) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        render_as_batch=True,
        compare_type=True,
    )


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as conn:
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_online()
