"""Scrape a running emulated engine under load; compare with the load generator's numbers."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _tools import running_emulator
from agent_helpers import SCRAPE_SLACK_S

from slotune.collector.agent.loop import Agent
from slotune.collector.agent.snapshot import scrape_snapshot
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import parse_target_arg
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.bench import ArrivalSpec, BenchConfig, run_benchmark
from slotune.collector.metrics.summary import summarize_metrics
from slotune.collector.store import bucket_quantile, counter_increase, open_store


@pytest.fixture
def emulated_engine(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    timings = tmp_path / "timings.jsonl"
    with running_emulator(timings, speedup=20) as url:
        yield url, timings


@pytest.mark.slow
def test_summary_of_a_loaded_emulated_engine_matches_the_load_generator(
    emulated_engine: tuple[str, Path], agent_db: str, tmp_path: Path
) -> None:
    url, timings = emulated_engine
    target = parse_target_arg(f"vllm={url}", interval_s=0.25, node="n1")
    agent = Agent(
        [target],
        StoreWriter(agent_db, Spool(tmp_path / "spool"), flush_interval_s=0.1),
        timeout_s=SCRAPE_SLACK_S,
    )
    before = scrape_snapshot("vllm", url)
    stop_at = {"t": float("inf")}

    def run_agent() -> None:
        async def until_stopped() -> None:
            task = asyncio.create_task(agent.run())
            while time.time() < stop_at["t"]:
                await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        asyncio.run(until_stopped())

    runner = threading.Thread(target=run_agent)
    runner.start()
    try:
        time.sleep(0.6)
        start = time.time()
        result = run_benchmark(
            BenchConfig(
                url=url,
                arrival=ArrivalSpec.from_rate(15.0),
                input_len="512",
                output_len="48",
                num_requests=60,
                cooldown=False,
                seed=3,
            )
        )
        time.sleep(0.6)  # two more scrapes after the last response
        end = time.time()
    finally:
        stop_at["t"] = time.time()
        runner.join(timeout=30)
        agent.close()
    records = result.records
    assert result.summary.num_errors == 0 and len(records) == 60
    after = scrape_snapshot("vllm", url)

    with open_store(agent_db) as store:
        (s,) = summarize_metrics(store, window_s=end - start, end_ts=end)
        finished = counter_increase(store, s.target, "e2e_count", start, end)
        out_tokens = counter_increase(store, s.target, "generation_tokens", start, end)
    # counts are exact: the engine counted every request the load generator sent
    assert finished == len(records)
    assert out_tokens == sum(r.output_tokens or 0 for r in records)
    assert after.counters["generation_tokens"] - before.counters["generation_tokens"] == out_tokens
    assert s.model == "llama-3.1-8b" and s.is_up is True
    # latencies: the window's percentiles are exactly those of the engine's own histogram
    # increase between a snapshot before the load and one after it
    summary = s.to_dict()
    for metric in ("ttft", "itl", "e2e"):
        delta = [
            (le, n - n0)
            for (le, n), (_, n0) in zip(
                after.histograms[metric].buckets, before.histograms[metric].buckets, strict=True
            )
        ]
        for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            expected = bucket_quantile(q, delta)
            assert expected is not None
            assert summary[f"{metric}_ms"][key] == pytest.approx(expected * 1000.0), metric
    # and the load generator, which sees HTTP and streaming on top, never sees less than
    # the engine's own per-request timings
    lines = [json.loads(line) for line in timings.read_text().splitlines()]
    client = result.summary.to_dict()
    engine_ttft_ms = sorted((t["first_token_s"] - t["arrival_s"]) * 1000.0 for t in lines)
    assert client["ttft_ms"]["p50"] >= engine_ttft_ms[len(lines) // 2 - 1]
    assert s.request_throughput == pytest.approx(len(records) / (end - start))
    assert s.kv_usage is not None and 0.0 <= s.kv_usage <= 1.0
