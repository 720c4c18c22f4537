"""Tuning studies: drop ``optuna_study_name``, always equal to ``name``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tuning_study") as batch:
        batch.drop_column("optuna_study_name")


def downgrade() -> None:
    with op.batch_alter_table("tuning_study") as batch:
        batch.add_column(sa.Column("optuna_study_name", sa.String(length=512), nullable=True))
    op.execute("UPDATE tuning_study SET optuna_study_name = name")
    with op.batch_alter_table("tuning_study") as batch:
        batch.alter_column("optuna_study_name", existing_type=sa.String(length=512), nullable=False)
