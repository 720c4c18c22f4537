"""Fixtures of the agent's tests: HTTP servers serving metrics, a migrated SQLite store."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from agent_helpers import MetricsServer, Routes

from slotune.collector.store import upgrade


@pytest.fixture
def metrics_server() -> Iterator[Callable[[Routes], MetricsServer]]:
    """Factory: ``metrics_server({"/metrics": lambda: text})`` starts a server."""
    started: list[MetricsServer] = []

    def make(routes: Routes) -> MetricsServer:
        server = MetricsServer(routes).start()
        started.append(server)
        return server

    yield make
    for s in started:
        s.stop()


@pytest.fixture
def agent_db(sqlite_url: str) -> str:
    """A migrated SQLite store URL."""
    upgrade(sqlite_url)
    return sqlite_url
