"""One target exposing what the store cannot hold, next to a healthy one, on both stores.

The healthy target's samples must all arrive; the poisoned target's usable samples too; what
cannot be stored is dropped (or quarantined) and counted, and nothing stops the writer.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from agent_helpers import (
    SCRAPE_SLACK_S,
    MetricsServer,
    Routes,
    models_json,
    samples_of,
    vllm_exposition,
)

from slotune.collector.agent.base import SourceKind
from slotune.collector.agent.loop import Agent
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import make_target
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.store import SampleIn, upgrade

Server = Callable[[Routes], MetricsServer]

NUM_SCRAPES = 4
LONG = "x" * 300


def poisoned_exposition() -> str:
    many_labels = ",".join(f'l{i}="v"' for i in range(100))
    return "\n".join(
        [
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{model_name="m"} 3',
            f"# TYPE {LONG} gauge",
            f"{LONG} 1",
            f'vllm:num_requests_waiting{{{LONG}="v"}} 2',
            f'vllm:num_requests_waiting{{path="{"p" * 5000}"}} 4',
            f"vllm:num_requests_waiting{{{many_labels}}} 5",
            "",
        ]
    )


def test_a_poisoned_target_never_holds_back_a_healthy_one(
    store_url: str, tmp_path: Path, metrics_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    upgrade(store_url)
    waiting = itertools.count()
    healthy = metrics_server(
        {
            "/metrics": lambda: vllm_exposition([1, 0, 0, 0, 0, 0, 0], waiting=next(waiting)),
            "/v1/models": lambda: models_json("llama"),
        }
    )
    poisoned = metrics_server(
        {"/metrics": poisoned_exposition, "/v1/models": lambda: models_json("m" * 500)}
    )
    targets = [
        make_target(SourceKind.VLLM, healthy.url, node="n", name="healthy"),
        make_target(SourceKind.VLLM, poisoned.url, node="n", name="poisoned"),
    ]
    ticks = itertools.count(1_000_000)
    writer = StoreWriter(store_url, Spool(tmp_path / "spool"), flush_interval_s=0.05)
    agent = Agent(targets, writer, timeout_s=SCRAPE_SLACK_S, clock=lambda: float(next(ticks)))
    caplog.set_level(logging.WARNING)
    try:
        for _ in range(NUM_SCRAPES):
            outcomes = asyncio.run(agent.scrape_all_once())
            assert all(o.is_up for o in outcomes)
    finally:
        agent.close()

    good = samples_of(store_url, "healthy")
    assert good["vllm:num_requests_waiting"] == NUM_SCRAPES
    assert good["up"] == NUM_SCRAPES
    bad = samples_of(store_url, "poisoned")
    assert bad["vllm:num_requests_running"] == NUM_SCRAPES
    assert bad["up"] == NUM_SCRAPES
    assert bad["vllm:num_requests_waiting"] == NUM_SCRAPES  # the truncated label value
    assert LONG not in bad
    counts = agent.encoder.bounds.counts("poisoned")
    assert counts.num_dropped >= 3 and counts.num_truncated == 1
    assert "target poisoned exposes samples the store cannot hold" in caplog.text
    assert Spool(tmp_path / "spool").is_empty()


def test_poisoned_spool_lines_and_refused_batches_are_quarantined(
    store_url: str, tmp_path: Path
) -> None:
    """What an older agent (or a hand edit) left in the spool cannot stall the writer."""
    upgrade(store_url)
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    good = [["healthy", "up", "gauge", {}, 1.0 + i, 1.0] for i in range(3)]
    lines = [
        [["healthy", None, "gauge", {}, 10.0, 1.0]],  # null name
        [["healthy", "up", "gauge", ["not", "a", "mapping"], 11.0, 1.0]],
        "[[",  # torn
        good,
        # one batch mixing both targets; the store refuses the poisoned part only
        [["poisoned", "m", "no-such-type", {}, 12.0, 1.0], ["healthy", "up", "gauge", {}, 12.0, 1]],
    ]
    (spool_dir / "spool-000000000001.jsonl").write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    )
    spool = Spool(spool_dir)
    writer = StoreWriter(store_url, spool)
    try:
        writer.write_now([SampleIn("healthy", "up", "gauge", {}, 20.0, 1.0)])
    finally:
        writer.close()
    assert samples_of(store_url, "healthy") == {"up": 5}
    assert spool.is_empty()
    stats = spool.stats()
    assert stats.num_rejected_batches == 4 and stats.num_rejected_samples == 1
    rejected = [json.loads(x) for x in spool.rejected_path.read_text().splitlines()]
    assert len(rejected) == 4
    assert "no-such-type" in rejected[-1]["reason"]


def test_a_runaway_body_or_a_garbage_model_list_is_a_target_error(
    agent_db: str, tmp_path: Path, metrics_server: Server
) -> None:
    healthy = metrics_server(
        {
            "/metrics": lambda: vllm_exposition([1, 0, 0, 0, 0, 0, 0]),
            "/v1/models": lambda: ("[" * 100_000, "application/json"),
        }
    )
    runaway = metrics_server({"/metrics": lambda: "# HELP x y\n" * 1000})
    targets = [
        make_target(SourceKind.VLLM, healthy.url, node="n", name="healthy"),
        make_target(SourceKind.VLLM, runaway.url, node="n", name="runaway", max_body_bytes=4096),
    ]
    writer = StoreWriter(agent_db, Spool(tmp_path / "spool"), flush_interval_s=0.05)
    agent = Agent(targets, writer, timeout_s=SCRAPE_SLACK_S)
    try:
        by_name = {o.target: o for o in asyncio.run(agent.scrape_all_once())}
    finally:
        agent.close()
    assert by_name["healthy"].is_up
    assert not by_name["runaway"].is_up and "answered more than" in by_name["runaway"].error


def test_an_unexpected_error_sets_the_batch_aside_and_the_writer_goes_on(
    agent_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slotune.collector.agent import writer as writer_module

    calls = itertools.count()
    real = writer_module.write_samples

    def flaky(store: object, batch: list[SampleIn]) -> int:
        if next(calls) == 0:
            raise OSError("disk on fire")
        return real(store, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_module, "write_samples", flaky)
    spool = Spool(tmp_path / "spool")
    writer = StoreWriter(agent_db, spool)
    try:
        writer.write_now([SampleIn("t", "up", "gauge", {}, 1.0, 1.0)])
        writer.write_now([SampleIn("t", "up", "gauge", {}, 2.0, 1.0)])
    finally:
        writer.close()
    assert samples_of(agent_db, "t") == {"up": 1}
    assert "disk on fire" in spool.rejected_path.read_text()
