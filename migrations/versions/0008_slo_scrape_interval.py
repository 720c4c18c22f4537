"""The scrape interval an SLO was applied for is stored with it (``slo.scrape_interval_s``),
so that ``alerts evaluate`` and ``alerts run`` refuse the same short windows as ``slo apply``
without the interval being given again. Rows of earlier revisions have none (NULL).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("slo") as batch:
        batch.add_column(sa.Column("scrape_interval_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("slo") as batch:
        batch.drop_column("scrape_interval_s")
