"""Benchmark requests: chunks past the per-request bound on timed chunks, counted.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("bench_request") as batch:
        batch.add_column(sa.Column("untimed", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bench_request") as batch:
        batch.drop_column("untimed")
