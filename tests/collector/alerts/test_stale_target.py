"""A target whose last scrape is older than the stale window is not up, whatever its last
``up`` sample said: its agent stopped."""

from __future__ import annotations

import time

from slotune.collector.store import SampleIn, open_store, register_target, upgrade, write_samples
from slotune.collector.views import fleet_table, overview


def test_a_target_scraped_minutes_ago_is_not_counted_up(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    now = time.time()
    with open_store(sqlite_url) as store:
        for name, last in (("live", now - 5), ("gone", now - 600)):
            register_target(store, name, "vllm", "", {})
            write_samples(store, [SampleIn(name, "up", "gauge", {}, last, 1.0)])
        o = overview(store, end_ts=now)
        table = fleet_table(store, start_ts=now - 900, end_ts=now)
    assert (o.num_targets, o.num_up, o.num_down, o.num_stale) == (2, 1, 0, 1)
    up = {row.summary.target: row.summary.is_up for row in table.targets}
    assert up == {"live": True, "gone": False}
