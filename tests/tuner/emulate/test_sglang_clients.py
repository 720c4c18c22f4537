"""slotune's own clients against the emulated SGLang: the load generator, the agent, the lag reader."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
from _tools import SLOTUNE
from emulate_helpers import RunningEmulator
from prometheus_client.parser import text_string_to_metric_families

from slotune.collector.bench import ArrivalSpec, BenchConfig, run_benchmark
from slotune.collector.metrics.summary import summarize_metrics
from slotune.collector.store import open_store, upgrade
from slotune.tuner.emulate.lag_client import fetch_lag


def _sample_sum(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    )


def test_bench_drives_the_emulated_sglang(sglang_emulator: RunningEmulator) -> None:
    url = sglang_emulator.url
    config = BenchConfig(
        url=url,
        arrival=ArrivalSpec.from_rate(20.0),
        input_len="64",
        output_len="8",
        num_requests=12,
        cooldown=False,
        seed=1,
    )
    result = run_benchmark(config)
    assert result.summary.num_errors == 0 and len(result.records) == 12
    assert all(r.output_tokens == 8 for r in result.records)
    # the engine counted what the load generator sent, streamed
    assert _sample_sum(url, "sglang:num_requests_total") == 12
    assert _sample_sum(url, "sglang:generation_tokens_total") == 12 * 8


def test_agent_stores_the_emulated_sglangs_metrics(
    sglang_emulator: RunningEmulator, tmp_path: Path
) -> None:
    url = sglang_emulator.url
    with httpx.Client(timeout=30) as client:
        for _ in range(3):
            body = {"prompt": "the engine keeps the keys", "max_tokens": 4}
            client.post(f"{url}/v1/completions", json=body).raise_for_status()
    db = f"sqlite:///{tmp_path / 'slotune.db'}"
    upgrade(db)
    agent = [SLOTUNE, "--db", db, "agent", "--target", f"sglang={url}", "--once"]
    subprocess.run(agent, check=True, capture_output=True, timeout=120)
    with open_store(db) as store:
        (summary,) = summarize_metrics(store)
    assert (summary.kind, summary.model, summary.is_up) == ("sglang", "llama-3.1-8b", True)
    assert summary.kv_usage is not None and 0.0 <= summary.kv_usage <= 1.0
    assert summary.requests_running == 0 and summary.requests_waiting == 0
    assert summary.prefix_hit_rate is not None


def test_the_launch_backend_reads_the_emulated_sglangs_lag(
    sglang_emulator: RunningEmulator,
) -> None:
    url = sglang_emulator.url
    httpx.post(f"{url}/generate", json={"text": "hi"}, timeout=30).raise_for_status()
    report = fetch_lag(url, "sglang")
    assert report is not None and report.num_steps > 0
