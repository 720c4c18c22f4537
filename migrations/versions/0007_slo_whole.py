"""SLOs stored whole: ``interpolate`` and the alerting settings move onto the ``slo`` row.

Before this revision they rode on the ``config`` of each of the SLO's ``slo_burn`` alert
rules (the same on every rule of an SLO), and an SLO without rules had the defaults. The
upgrade copies them from the SLO's rules, then empties those rules' ``config``; the
downgrade copies them back.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SLO = sa.table(
    "slo",
    sa.column("name", sa.String()),
    sa.column("interpolate", sa.Boolean()),
    sa.column("alerting_enabled", sa.Boolean()),
    sa.column("alerting_windows", sa.JSON()),
    sa.column("alerting_labels", sa.JSON()),
)
_RULE = sa.table(
    "alert_rule",
    sa.column("id", sa.BigInteger()),
    sa.column("name", sa.String()),
    sa.column("kind", sa.String()),
    sa.column("slo_name", sa.String()),
    sa.column("labels", sa.JSON()),
    sa.column("config", sa.JSON()),
    sa.column("enabled", sa.Boolean()),
)
_SLO_KIND = "slo_burn"
_COLUMNS = ("interpolate", "alerting_enabled", "alerting_windows", "alerting_labels")


def upgrade() -> None:
    with op.batch_alter_table("slo") as batch:
        batch.add_column(sa.Column("interpolate", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("alerting_enabled", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("alerting_windows", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("alerting_labels", sa.JSON(), nullable=True))
    bind = op.get_bind()
    bind.execute(
        _SLO.update().values(
            interpolate=False, alerting_enabled=True, alerting_windows=[], alerting_labels={}
        )
    )
    rules = bind.execute(
        sa.select(_RULE.c.slo_name, _RULE.c.labels, _RULE.c.config, _RULE.c.enabled)
        .where(_RULE.c.kind == _SLO_KIND)
        .order_by(_RULE.c.name)
    ).all()
    # Every rule of an SLO carried the same settings; the last by name is what was read.
    settings = {r.slo_name: r for r in rules}
    for name, rule in settings.items():
        config: dict[str, Any] = rule.config or {}
        bind.execute(
            _SLO.update()
            .where(_SLO.c.name == name)
            .values(
                interpolate=bool(config.get("interpolate", False)),
                alerting_enabled=bool(rule.enabled),
                alerting_windows=list(config.get("windows", [])),
                alerting_labels=dict(rule.labels or {}),
            )
        )
    bind.execute(_RULE.update().where(_RULE.c.kind == _SLO_KIND).values(config={}))
    with op.batch_alter_table("slo") as batch:
        for column in _COLUMNS:
            batch.alter_column(column, nullable=False)


def downgrade() -> None:
    bind = op.get_bind()
    slos = bind.execute(sa.select(_SLO.c.name, _SLO.c.interpolate, _SLO.c.alerting_windows)).all()
    for slo in slos:
        bind.execute(
            _RULE.update()
            .where(_RULE.c.kind == _SLO_KIND, _RULE.c.slo_name == slo.name)
            .values(
                config={
                    "interpolate": bool(slo.interpolate),
                    "windows": list(slo.alerting_windows or []),
                }
            )
        )
    with op.batch_alter_table("slo") as batch:
        for column in reversed(_COLUMNS):
            batch.drop_column(column)
