"""Alembic migrations of the slotune store (applied by `slotune db upgrade`)."""
