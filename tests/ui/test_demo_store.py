"""``slotune demo --db NEWFILE`` creates the store it is pointed at, as the default one is."""

from __future__ import annotations

from pathlib import Path

from slotune.collector.store import schema_status
from slotune.ui.cli.demo import create_if_new


def test_a_new_sqlite_file_is_created_and_an_existing_store_left_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    create_if_new(url)
    status = schema_status(url)
    assert status.is_current and status.current is not None
    create_if_new(url)  # already there and current: nothing to do
    assert schema_status(url).current == status.current
    create_if_new(None)  # the default store creates itself
