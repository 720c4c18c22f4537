"""``diagnose workload``: traffic figures and prefix reuse with known answers, the bundled
Mooncake (caching pays) and Azure (it does not) traces, and a stored bench run."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from slotune.collector.records import RequestRecord
from slotune.collector.store import (
    BenchRunMeta,
    list_diagnoses,
    open_store,
    save_bench_run,
    upgrade,
)
from slotune.collector.workload.traces import Trace, TraceRequest, named_workload
from slotune.tuner.diagnose import diagnose_workload
from slotune.tuner.diagnose._prefix import prefix_reuse
from slotune.tuner.diagnose._traffic import traffic
from slotune.ui.cli import app

SIM_REQUESTS = 60


def _req(
    t: float, hashes: tuple[int, ...], tokens: int, session: str | None = None
) -> TraceRequest:
    return TraceRequest(t, tokens, 10, hash_ids=hashes, block_size=4, session_id=session)


def test_prefix_reuse_known_answers() -> None:
    requests = [
        _req(0, (1, 2, 3), 12),  # system prompt block 1
        _req(1, (1, 2, 3, 4, 5), 18),  # next turn: extends the whole first prompt's full blocks
        _req(2, (1, 9), 6),  # same system prompt, new question
        _req(3, (7, 8), 8),
    ]
    p = prefix_reuse(requests, 512, capacity_tokens=12)
    assert p is not None
    assert p.block_size == 4
    assert (p.num_blocks, p.num_distinct_blocks) == (12, 8)
    assert p.reused_block_share == pytest.approx(4 / 12)  # 1, 2, 3 again, then 1
    # tokens: 12 + 18 + 6 + 8 = 44; reused 4 + 4 + 4 (full blocks 1-3 of turn 2) + 4 (block 1)
    assert p.reused_token_share == pytest.approx(16 / 44)
    assert p.multi_turn_share == pytest.approx(1 / 4)
    assert p.system_prompt_share == pytest.approx(3 / 4)
    # stack distances of the hits: 1 after 2,3 -> 2; 2 -> 2; 3 -> 2; 1 after 2,3,4,5 -> 4
    assert p.working_set_blocks == 5  # 90 % of 4 hits -> the 4th needs 5 blocks
    assert p.reused_block_share_at_capacity == pytest.approx(
        3 / 12
    )  # 3 blocks keep the 3 hits at distance 2


def test_sessions_count_as_turns() -> None:
    requests = [_req(0, (1,), 4, "a"), _req(1, (2,), 4, "a"), _req(2, (3,), 4, "b")]
    p = prefix_reuse(requests, 512)
    assert p is not None and p.multi_turn_share == pytest.approx(1 / 3)
    assert prefix_reuse([TraceRequest(0, 10, 1)], 512) is None


def test_traffic_known_answers() -> None:
    # 180 s of one request a second, then a burst of 60 in one second
    times = [float(i) for i in range(180)] + [180 + i / 60 for i in range(60)]
    requests = [
        TraceRequest(t, 100 if i % 10 else 1000, 100 if i % 10 else 1000)
        for i, t in enumerate(times)
    ]
    f = traffic(requests)
    assert f.num_requests == 240
    assert f.length_correlation == pytest.approx(1.0)
    assert f.input_tokens.p50 == 100
    # minutes: 60, 60, 60 and the burst minute is partial (dropped): peak = mean
    assert f.peak_to_mean_1m == pytest.approx(1.0)
    assert f.peak_to_mean_1h is None
    gaps = np.diff(times)
    assert f.interarrival_cv == pytest.approx(gaps.std() / gaps.mean())
    assert f.long_prefill_token_share == pytest.approx(24000 / (24000 + 216 * 100))


def _codes(result: dict[str, Any]) -> list[str]:
    return [f["code"] for f in result["findings"]]


def test_mooncake_recommends_prefix_caching() -> None:
    d = diagnose_workload(named_workload("mooncake-conversation"), num_sim_requests=SIM_REQUESTS)
    data = d.to_dict()
    assert "prefix-caching-helps" in _codes(data)
    # a cluster trace at its own rate overloads one replica, and the diagnosis says so
    assert _codes(data)[0] == "replica-overloaded"
    assert d.prefix is not None and d.prefix.reused_token_share > 0.3
    f = next(f for f in d.findings if f.code == "prefix-caching-helps")
    assert f.evidence["sim_prefill_tokens_saved"] > 0
    assert "enable_prefix_caching" in f.parameters
    assert f.tune_command is not None
    on, off = d.runs[0], d.runs[1]
    assert on.prefix_hit_rate > 0 and off.prefix_hit_rate == 0
    assert data["simulated"]["num_requests"] == SIM_REQUESTS


def test_time_scale_compares_settings_at_a_rate_one_replica_serves() -> None:
    d = diagnose_workload(
        named_workload("mooncake-conversation"), num_sim_requests=SIM_REQUESTS, time_scale=20.0
    )
    codes = [f.code for f in d.findings]
    assert "replica-overloaded" not in codes
    assert any(c.startswith("chunked-prefill-") for c in codes)


@pytest.mark.parametrize("name", ["azure-code", "azure-conv"])
def test_azure_does_not_recommend_caching(name: str) -> None:
    d = diagnose_workload(named_workload(name), num_sim_requests=SIM_REQUESTS)
    assert d.prefix is None
    assert "prefix-caching-wastes-memory" in [f.code for f in d.findings]
    assert "prefix-caching-helps" not in [f.code for f in d.findings]


def test_cli_on_a_stored_bench_run(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    records = [
        RequestRecord(
            f"r{i}",
            100.0 + i * 0.5,
            100.1 + i * 0.5,
            101 + i * 0.5,
            input_tokens=t.input_tokens,
            output_tokens=t.output_tokens,
        )
        for i, t in enumerate(named_workload("mooncake-conversation").requests[:80])
    ]
    meta = BenchRunMeta("run", "http://127.0.0.1:1", "m", "mooncake-conversation", 100.0)
    with open_store(sqlite_url) as store:
        run_id = save_bench_run(store, meta, records, {})
    result = CliRunner().invoke(
        app,
        [
            "--db",
            sqlite_url,
            "diagnose",
            "workload",
            "--run",
            str(run_id),
            "--sim-requests",
            "40",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["traffic"]["num_requests"] == 80
    assert data["traffic"]["mean_rate"] == pytest.approx(2.0)
    assert data["prefix"]["num_blocks"] > 0  # blocks of the replayed bundled workload
    assert "--workload mooncake-conversation" in (data["findings"][0]["tune_command"] or "")
    with open_store(sqlite_url) as store:
        stored = list_diagnoses(store, kind="workload")
    assert [d.result for d in stored] == [data]


def test_cli_needs_exactly_one_input(sqlite_url: str) -> None:
    result = CliRunner().invoke(app, ["--db", sqlite_url, "diagnose", "workload"])
    assert result.exit_code == 1
    assert "exactly one of TRACE" in result.output
    trace = Trace("t", (TraceRequest(0, 1, 1),))
    assert traffic(trace.requests).num_requests == 1
