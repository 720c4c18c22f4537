"""The emulated engine's own lag: late steps counted against the speedup, served on /metrics,
read back, and a starved loop (a clock that jumps) reported as not trustworthy."""

from __future__ import annotations

import asyncio
import time

import httpx
from emulate_helpers import FakeCore, make_emulator, new_request
from prometheus_client import CollectorRegistry, generate_latest

from slotune.tuner.emulate.lag import (
    LATE_STEP_S,
    LagMetrics,
    LagMonitor,
    LagReport,
    read_lag,
)
from slotune.tuner.emulate.lag_client import fetch_lag
from slotune.tuner.emulate.realtime import RealtimeEngine


def test_a_step_is_late_by_its_lag_in_emulated_gpu_time() -> None:
    monitor = LagMonitor(time_scale=2.0)  # 10 ms of GPU time is 5 ms of real time here
    assert not monitor.observe(0.004)
    assert monitor.observe(0.006)
    assert monitor.report() == LagReport(num_steps=2, num_late_steps=1)


def test_trustworthy_while_at_most_one_step_in_a_hundred_is_late() -> None:
    kept_up = LagReport(num_steps=1000, num_late_steps=10)
    assert kept_up.is_trustworthy
    assert kept_up.describe() == (
        "the emulated engine kept up with real time: 10 of 1,000 steps (1.0%) late"
    )
    behind = LagReport(num_steps=1000, num_late_steps=11)
    assert not behind.is_trustworthy
    assert "fell behind real time: 11 of 1,000 steps (1.1%)" in behind.describe()
    assert "not trustworthy" in behind.describe()
    assert behind.to_dict()["is_trustworthy"] is False
    assert LagReport(0, 0).is_trustworthy


class _StarvedClock:
    """perf_counter plus 50 ms at every reading: the process never gets the CPU in time."""

    def __init__(self) -> None:
        self._offset_s = 0.0

    def __call__(self) -> float:
        self._offset_s += 0.05
        return time.perf_counter() + self._offset_s


async def _serve_one_request(engine: RealtimeEngine) -> None:
    loop_task = asyncio.create_task(engine.run())
    handle = engine.submit("r1", "r1", (1, 2, 3), max_tokens=5)
    async for _ in handle.deliveries():
        pass
    handle.close()
    engine.stop()
    await loop_task


def test_a_starved_loop_counts_every_step_late_and_serves_the_count() -> None:
    registry = CollectorRegistry()
    engine = RealtimeEngine(
        FakeCore(step_s=0.001),
        new_request,
        time_scale=1.0,
        observers=[LagMetrics(registry)],
        clock=_StarvedClock(),
    )
    asyncio.run(_serve_one_request(engine))
    report = engine.lag
    assert report.num_steps >= 5
    assert report.num_late_steps == report.num_steps
    assert min(engine.lateness_s) > LATE_STEP_S
    assert not report.is_trustworthy
    assert read_lag(generate_latest(registry).decode()) == report


def test_the_lag_is_read_back_from_the_engine_and_absent_elsewhere() -> None:
    running = make_emulator(step_s=0.002).start()
    try:
        body = {"prompt": "x", "max_tokens": 3}
        assert httpx.post(f"{running.url}/v1/completions", json=body, timeout=60).is_success
        report = fetch_lag(running.url)
        assert report is not None
        assert report.num_steps == running.emulator.engine.lag.num_steps >= 3
    finally:
        running.close()
    assert fetch_lag(running.url, timeout_s=5) is None  # nothing listens any more
    assert read_lag("vllm:num_requests_running 0\n") is None  # a real engine
