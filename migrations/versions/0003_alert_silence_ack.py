"""Alert silences and acknowledgements.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "alert_silence",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("rule", sa.String(length=200), nullable=False),
        sa.Column("until_ts", sa.Float(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_silence")),
    )
    op.create_index("ix_alert_silence_rule_until", "alert_silence", ["rule", "until_ts"])
    op.create_table(
        "alert_ack",
        sa.Column("event_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["alert_event.id"],
            name=op.f("fk_alert_ack_event_id_alert_event"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_alert_ack")),
    )


def downgrade() -> None:
    op.drop_table("alert_ack")
    op.drop_index("ix_alert_silence_rule_until", table_name="alert_silence")
    op.drop_table("alert_silence")
