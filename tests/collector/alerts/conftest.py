from __future__ import annotations

from collections.abc import Iterator

import pytest

from slotune.collector.store import Store, open_store, upgrade


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An upgraded, open store on SQLite and on PostgreSQL."""
    upgrade(store_url)
    with open_store(store_url) as s:
        yield s
