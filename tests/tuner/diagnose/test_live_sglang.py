"""``diagnose live`` reads an SGLang engine as it reads the others: the agent scrapes a real
HTTP server serving SGLang's names, beside a DCGM exporter on the same node."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from slotune.collector.agent.loop import Agent
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import make_target
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.store import open_store, upgrade
from slotune.collector.vocabulary import SourceKind
from slotune.tuner.diagnose.live import diagnose_live
from tests.collector.agent.agent_helpers import MetricsServer

T0 = 1_800_000_000.0
STEP_S = 60.0
LB = 'model_name="m",engine_type="unified",tp_rank="0",pp_rank="0"'


def sglang_text(minute: int) -> str:
    """A KV-bound SGLang server: every minute 100 requests, each queued 2 s on average."""
    n = 100 * minute
    return (
        "\n".join(
            [
                "# TYPE sglang:queue_time_seconds histogram",
                f'sglang:queue_time_seconds_bucket{{{LB},le="+Inf"}} {n}',
                f"sglang:queue_time_seconds_sum{{{LB}}} {2.0 * n}",
                f"sglang:queue_time_seconds_count{{{LB}}} {n}",
                "# TYPE sglang:num_running_reqs gauge",
                f"sglang:num_running_reqs{{{LB}}} 64",
                "# TYPE sglang:num_queue_reqs gauge",
                f"sglang:num_queue_reqs{{{LB}}} 12",
                "# TYPE sglang:token_usage gauge",
                f"sglang:token_usage{{{LB}}} 0.98",
                "# TYPE sglang:num_retracted_requests_total counter",
                f"sglang:num_retracted_requests_total{{{LB}}} {40 * minute}",
                "# TYPE sglang:prompt_tokens_total counter",
                f"sglang:prompt_tokens_total{{{LB}}} {1000 * minute}",
                "# TYPE sglang:cached_tokens_total counter",
                f"sglang:cached_tokens_total{{{LB}}} {300 * minute}",
                "# TYPE sglang:num_requests_total counter",
                f"sglang:num_requests_total{{{LB}}} {n}",
            ]
        )
        + "\n"
    )


DCGM = (
    "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n"
    'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-1"} 0.97\n'
)


@pytest.fixture
def db(sqlite_url: str) -> str:
    upgrade(sqlite_url)
    return sqlite_url


def test_an_sglang_engine_gets_its_figures_and_its_node_gpu(db: str, tmp_path: Path) -> None:
    now = {"minute": 0}
    engine = MetricsServer({"/metrics": lambda: sglang_text(now["minute"])}).start()
    gpu = MetricsServer({"/metrics": lambda: DCGM}).start()
    try:
        targets = [
            make_target(SourceKind.SGLANG, engine.url, name="sglang-a", node="n1"),
            make_target(SourceKind.DCGM, gpu.url, name="gpu-n1", node="n1"),
        ]
        writer = StoreWriter(db, Spool(tmp_path / "spool"), flush_interval_s=0.05)
        agent = Agent(targets, writer, timeout_s=30.0, clock=lambda: T0 + STEP_S * now["minute"])
        try:
            for minute in range(3):
                now["minute"] = minute
                asyncio.run(agent.scrape_all_once())
        finally:
            agent.close()
    finally:
        engine.stop()
        gpu.stop()
    with open_store(db) as store:
        d = diagnose_live(store, window_s=2 * STEP_S, end_ts=T0 + 2 * STEP_S)
    (t,) = d.targets
    assert t.target == "sglang-a" and t.gpu_targets == ("gpu-n1",)
    fig = t.figures
    assert fig.kv_usage == pytest.approx(0.98)
    assert fig.requests_running == pytest.approx(64) and fig.requests_waiting == pytest.approx(12)
    assert fig.preemptions_per_min == pytest.approx(40)
    assert fig.prefix_hit_rate == pytest.approx(0.3)
    assert fig.queue_s == pytest.approx(2.0)
    assert fig.gpu_busy == pytest.approx(0.97)
    assert "kv-bound" in [f.code for f in t.findings]
