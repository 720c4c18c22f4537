"""PostgreSQL stops mid-run and comes back: every scraped sample arrives exactly once."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import SCRAPE_SLACK_S, MetricsServer, Routes
from sqlalchemy import text

from slotune.collector.agent.loop import Agent
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import parse_target_arg
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.store import open_store, upgrade


@pytest.mark.postgres
@pytest.mark.slow
def test_store_outage_spools_and_replays_exactly_once(
    pg_server: Any, pg_url: str, tmp_path: Path, metrics_server: Callable[[Routes], MetricsServer]
) -> None:
    upgrade(pg_url)
    count = {"n": 0}
    lock = threading.Lock()

    def body() -> str:
        with lock:
            count["n"] += 1
            return (
                "# TYPE vllm:generation_tokens_total counter\n"
                f'vllm:generation_tokens_total{{model_name="m"}} {count["n"]}\n'
            )

    server = metrics_server({"/metrics": body})
    target = parse_target_arg(f"vllm={server.url}", interval_s=0.1, node="n1")
    writer = StoreWriter(pg_url, Spool(tmp_path / "spool"), flush_interval_s=0.1)
    agent = Agent([target.with_labels({"model": "m"})], writer, timeout_s=SCRAPE_SLACK_S)
    runner = threading.Thread(target=lambda: asyncio.run(agent.run(duration_s=6.0)))
    runner.start()
    try:
        time.sleep(1.0)
        pg_server.stop()
        time.sleep(2.0)
    finally:
        pg_server.start()
    runner.join(timeout=30)
    agent.close()
    assert not runner.is_alive()
    assert writer.stats().num_spooled > 0, "the outage was long enough to spool"

    with open_store(pg_url) as store, store.connection() as conn:
        rows = conn.execute(
            text(
                "SELECT s.ts, s.value FROM sample s JOIN metric_series m ON m.id = s.series_id "
                "WHERE m.name = 'generation_tokens' ORDER BY s.ts"
            )
        ).all()
        num_up = conn.execute(
            text(
                "SELECT count(*) FROM sample s JOIN metric_series m ON m.id = s.series_id "
                "WHERE m.name = 'up'"
            )
        ).scalar_one()
    values = [float(v) for _, v in rows]
    assert values == [float(i) for i in range(1, count["n"] + 1)]  # no gap, no duplicate
    assert len({ts for ts, _ in rows}) == len(rows)
    assert num_up == count["n"]
    assert Spool(tmp_path / "spool").is_empty()
