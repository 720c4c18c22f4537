"""The writer's in-memory backlog is bounded: past it the oldest batches go, counted."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import text

from slotune.collector.agent.spool import Spool
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.errors import ConfigError
from slotune.collector.store import SampleIn, open_store


def batch(second: int, size: int = 10) -> list[SampleIn]:
    return [
        SampleIn(
            "t1",
            "requests_running",
            "gauge",
            {"i": str(i)},
            1_700_000_000.0 + second,
            float(second),
        )
        for i in range(size)
    ]


def test_a_slow_store_drops_the_oldest_queued_batches_and_keeps_the_newest(
    agent_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = StoreWriter(agent_db, Spool(tmp_path / "spool"), batch_max=20, max_queued=30)
    with caplog.at_level(logging.WARNING, logger="slotune.collector.agent.writer"):
        for second in range(10):  # ten scrapes arrive while no write completes
            writer.put(batch(second))
    assert writer.stats().num_dropped == 70
    assert caplog.text.count("queued samples dropped") == 1  # logged once a minute at most
    writer.flush_now()
    writer.close()
    with open_store(agent_db) as store, store.connection() as conn:
        values = (
            conn.execute(
                text(
                    "SELECT DISTINCT s.value FROM sample s JOIN metric_series m ON m.id = s.series_id "
                    "WHERE m.name = 'requests_running' ORDER BY s.value"
                )
            )
            .scalars()
            .all()
        )
    assert values == [7.0, 8.0, 9.0]
    assert writer.stats().num_written == 30


def test_the_bound_must_hold_one_write(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max_queued"):
        StoreWriter(None, Spool(tmp_path / "spool"), batch_max=100, max_queued=50)
