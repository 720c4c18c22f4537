"""The spool: bounded, drop-oldest, replayed in order, survives torn lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotune.collector.agent.spool import Spool
from slotune.collector.store import SampleIn


def batch(i: int, n: int = 10) -> list[SampleIn]:
    return [SampleIn("t", "m", "counter", {"k": str(j)}, float(i), float(i)) for j in range(n)]


def test_replays_in_order_and_empties(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=2000)
    for i in range(20):
        spool.append(batch(i))
    assert spool.stats().num_segments > 1
    seen: list[float] = []
    assert spool.replay(lambda b: seen.append(b[0].ts)) == 20
    assert seen == [float(i) for i in range(20)]
    assert spool.is_empty()


def test_failed_replay_keeps_the_segment_for_next_time(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for i in range(3):
        spool.append(batch(i))

    def fail_on_second(b: list[SampleIn]) -> None:
        if b[0].ts == 1.0:
            raise ConnectionError("store went away")

    with pytest.raises(ConnectionError):
        spool.replay(fail_on_second)
    seen: list[float] = []
    spool.replay(lambda b: seen.append(b[0].ts))
    assert seen == [0.0, 1.0, 2.0]  # the first is sent again: the store ignores duplicates


def test_cap_drops_the_oldest_segments(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=6000, segment_bytes=1500)
    for i in range(40):
        spool.append(batch(i))
    stats = spool.stats()
    assert stats.num_bytes <= 6000 + 1500
    assert stats.num_dropped_batches > 0
    assert stats.num_dropped_samples == stats.num_dropped_batches * 10
    seen: list[float] = []
    spool.replay(lambda b: seen.append(b[0].ts))
    assert seen == [float(i) for i in range(40 - len(seen), 40)]  # the newest survive


def test_torn_last_line_is_skipped_and_survives_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append(batch(0))
    segment = next(tmp_path.glob("spool-*.jsonl"))
    with segment.open("a") as f:
        f.write('[["t","m","coun')
    seen: list[float] = []
    Spool(tmp_path).replay(lambda b: seen.append(b[0].ts))
    assert seen == [0.0]
