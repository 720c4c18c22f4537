"""The scrape loop against real HTTP servers and a real store."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from _tools import free_port
from agent_helpers import (
    SCRAPE_SLACK_S,
    MetricsServer,
    Routes,
    data_text,
    models_json,
    vllm_exposition,
)

from slotune.collector.agent.loop import Agent
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import make_target, parse_target_arg
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.metrics.summary import summarize_metrics
from slotune.collector.store import (
    bucket_quantile,
    counter_increase,
    latest_value,
    list_targets,
    open_store,
)

Server = Callable[[Routes], MetricsServer]


def make_agent(
    db: str,
    tmp_path: Path,
    args: list[str],
    *,
    interval_s: float = 5.0,
    clock: Callable[[], float] | None = None,
) -> Agent:
    targets = [parse_target_arg(a, interval_s=interval_s, node="n1") for a in args]
    writer = StoreWriter(db, Spool(tmp_path / "spool"), flush_interval_s=0.05)
    kwargs = {"clock": clock} if clock else {}
    return Agent(targets, writer, timeout_s=SCRAPE_SLACK_S, **kwargs)


def test_once_stores_raw_and_canonical_series_up_and_the_served_model(
    agent_db: str, tmp_path: Path, metrics_server: Server
) -> None:
    server = metrics_server(
        {
            "/metrics": lambda: data_text("vllm_v1_design_doc_example.prom"),
            "/v1/models": lambda: models_json("llama-3.1-8b"),
        }
    )
    agent = make_agent(agent_db, tmp_path, [f"vllm={server.url}"])
    try:
        (outcome,) = asyncio.run(agent.scrape_all_once())
    finally:
        agent.close()
    assert outcome.is_up and outcome.num_skipped_lines == 4
    name = outcome.target
    with open_store(agent_db) as store:
        assert latest_value(store, name, "up") == 1.0
        assert latest_value(store, name, "requests_running") == 8.0
        assert latest_value(store, name, "vllm:num_requests_running") == 8.0
        (target,) = list_targets(store)
    assert (target.kind, target.model, target.node) == ("vllm", "llama-3.1-8b", "n1")


def test_a_down_target_backs_off_logs_once_and_never_stops_the_others(
    agent_db: str, tmp_path: Path, metrics_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    server = metrics_server({"/metrics": lambda: vllm_exposition([1, 0, 0, 0, 0, 0, 0])})
    dead = f"http://127.0.0.1:{free_port()}"
    agent = make_agent(
        agent_db, tmp_path, [f"vllm={server.url}", f"dcgm={dead}", "nvml"], interval_s=0.1
    )
    caplog.set_level(logging.INFO, logger="slotune.collector.agent")
    try:
        asyncio.run(agent.run(duration_s=1.6))
    finally:
        agent.close()
    with open_store(agent_db) as store:
        ups = {t.name: _samples(store, t.name, "up") for t in list_targets(store)}
    good, bad, nvml = ups[f"vllm@{server.url[7:]}"], ups[f"dcgm@{dead[7:]}"], ups["nvml@n1"]
    assert len(good) >= 8 and set(good) == {1.0}
    assert 2 <= len(bad) <= 6 and set(bad) == {0.0}  # 0.2, 0.4, 0.8 s backoff
    assert set(nvml) == {0.0}
    downs = [r.getMessage() for r in caplog.records if "is down" in r.getMessage()]
    assert len(downs) == 2
    assert any("NVML unavailable" in m for m in downs)


def _samples(store: object, target: str, name: str) -> list[float]:
    from sqlalchemy import text

    with store.connection() as conn:  # type: ignore[attr-defined]
        rows = conn.execute(
            text(
                "SELECT s.value FROM sample s JOIN metric_series m ON m.id = s.series_id "
                "JOIN target t ON t.id = m.target_id WHERE t.name = :t AND m.name = :n "
                "ORDER BY s.ts"
            ),
            {"t": target, "n": name},
        ).all()
    return [float(r[0]) for r in rows]


def test_summary_uses_bucket_deltas_over_the_window_and_survives_a_restart(
    agent_db: str, tmp_path: Path, metrics_server: Server
) -> None:
    t0 = 1_800_000_000.0
    states = iter(
        [
            (t0, vllm_exposition([50, 50, 0, 0, 0, 0, 0], generation_tokens=1000)),
            (
                t0 + 60,
                vllm_exposition(
                    [50, 60, 30, 10, 0, 0, 0], generation_tokens=7000, waiting=3, kv_usage=0.5
                ),
            ),
            # engine restart: every series starts again from zero
            (
                t0 + 90,
                vllm_exposition(
                    [0, 0, 10, 0, 0, 0, 0], generation_tokens=600, waiting=1, kv_usage=0.5
                ),
            ),
        ]
    )
    now = {"ts": t0, "body": ""}

    def advance() -> None:
        now["ts"], now["body"] = next(states)

    server = metrics_server({"/metrics": lambda: now["body"]})
    agent = make_agent(agent_db, tmp_path, [f"vllm={server.url}"], clock=lambda: now["ts"])
    try:
        for _ in range(3):
            advance()
            asyncio.run(agent.scrape_all_once())
    finally:
        agent.close()
    with open_store(agent_db) as store:
        (s,) = summarize_metrics(store, window_s=90.0, end_ts=t0 + 90)
        first = summarize_metrics(store, window_s=60.0, end_ts=t0 + 60)[0]
        assert counter_increase(store, s.target, "generation_tokens", t0, t0 + 90) == 6600.0
    # window 1: 60 new observations: 10 in (0.01,0.02], 30 in (0.02,0.04], 10 in (0.04,0.08]
    # plus the 10 of the restarted engine in (0.02,0.04]
    deltas = [
        (0.01, 0),
        (0.02, 10),
        (0.04, 50),
        (0.08, 60),
        (0.16, 60),
        (0.32, 60),
        (float("inf"), 60),
    ]
    assert s.ttft_ms["p50"] == pytest.approx(bucket_quantile(0.5, deltas) * 1000)
    assert s.ttft_ms["p99"] == pytest.approx(bucket_quantile(0.99, deltas) * 1000)
    assert first.ttft_ms["p50"] == pytest.approx((0.02 + 0.02 * (25 - 10) / 30) * 1000)
    assert s.output_token_throughput == pytest.approx(6600 / 90)
    assert s.requests_waiting == 1.0
    assert s.is_up is True
    assert s.vram_used_bytes is None  # an engine target has no GPU series


def test_make_target_rejects_a_non_positive_interval() -> None:
    from slotune.collector.errors import ConfigError

    with pytest.raises(ConfigError, match="interval must be a positive number"):
        make_target(parse_target_arg("nvml", node="n").kind, "", interval_s=0, node="n")


def test_a_batch_the_store_refuses_is_logged_and_later_batches_still_go_in(
    agent_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from slotune.collector.store import SampleIn

    writer = StoreWriter(agent_db, Spool(tmp_path / "spool"))
    try:
        writer.write_now([SampleIn("t", "m", "nonsense-type", {}, 1.0, 1.0)])
        writer.write_now([SampleIn("t", "m", "gauge", {}, 2.0, 5.0)])
    finally:
        writer.close()
    assert "quarantined 1 samples (target t: sample 'm'" in caplog.text
    assert writer.stats().num_rejected == 1
    with open_store(agent_db) as store:
        assert latest_value(store, "t", "m") == 5.0
    spool = Spool(tmp_path / "spool")
    assert spool.is_empty()
    assert "nonsense-type" in spool.rejected_path.read_text()
