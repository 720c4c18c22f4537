from __future__ import annotations

from collections.abc import Iterator

import pytest
from fleet_traffic import BASE_TS, fill_store, write_openmetrics
from prometheus_server import backfill, serving

from slotune.collector.metrics import PromClient
from slotune.collector.store import Store, open_store, upgrade


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An upgraded, open store on SQLite and on PostgreSQL."""
    upgrade(store_url)
    with open_store(store_url) as s:
        yield s


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromClient]:
    """A real Prometheus on loopback holding ``fleet_traffic``'s traffic."""
    root = tmp_path_factory.mktemp("prom")
    write_openmetrics(root / "traffic.om", BASE_TS)
    backfill(root / "traffic.om", root / "tsdb")
    with serving(root / "tsdb") as url:
        client = PromClient(url)
        yield client
        client.close()


@pytest.fixture
def filled(store: Store) -> Store:
    """The store holding ``fleet_traffic``'s traffic, read by the agent's own sources."""
    fill_store(store, BASE_TS)
    return store
