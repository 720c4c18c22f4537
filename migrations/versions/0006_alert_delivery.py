"""Alert deliveries: the outbox of alert events, pending until each receiver confirmed them.

Events stored before this revision were sent (or lost) by the in-memory notifier of their
time; they get no delivery rows, so nothing old is sent again.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "alert_delivery",
        sa.Column("event_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("receiver", sa.String(length=64), nullable=False),
        sa.Column("delivered_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["alert_event.id"],
            name=op.f("fk_alert_delivery_event_id_alert_event"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("event_id", "receiver", name=op.f("pk_alert_delivery")),
    )
    op.create_index(
        "ix_alert_delivery_receiver_delivered", "alert_delivery", ["receiver", "delivered_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_alert_delivery_receiver_delivered", table_name="alert_delivery")
    op.drop_table("alert_delivery")
