"""``diagnose sim``: the simulator's split and engine state, in the words of a measured one."""

from __future__ import annotations

import json

import pytest
from trace_builder import SPLIT_KEYS
from typer.testing import CliRunner

from slotune.collector.workload.traces import named_workload, retime
from slotune.tuner.diagnose import diagnose_simulated
from slotune.tuner.sim.config import config_from_params
from slotune.ui.cli import app


def _run(params: dict[str, object], rate: float | None = None):
    trace = retime(named_workload("azure-conv"), num_requests=120, rate=rate)
    config = config_from_params("vllm", "llama-3.1-8b", "h100-sxm", params)
    return diagnose_simulated(config, trace)


def test_split_adds_up_like_a_measured_one() -> None:
    d = _run({})
    o = d.overall
    assert o.total_ms == pytest.approx(o.busy_ms + o.idle_ms)
    assert o.busy_ms == pytest.approx(o.compute_ms + o.exposed_comm_ms + o.exposed_memcpy_ms)
    assert 0 < o.host_idle_ms <= o.idle_ms
    step = d.step_split
    assert o.compute_ms == pytest.approx((step["compute_s"] + step["memory_s"]) * 1000)
    data = d.to_dict()
    assert data["overall"].keys() >= SPLIT_KEYS
    assert data["kind"] == "simulated" and data["figures"]["gpu_busy_source"] == "simulator"


def test_a_kv_starved_configuration_is_kv_bound() -> None:
    d = _run({"gpu_memory_utilization": 0.3, "max_num_seqs": 256, "max_model_len": 8192}, rate=40.0)
    codes = [f.code for f in d.findings]
    assert "kv-bound" in codes, (codes, d.figures)
    assert d.figures.preemptions_per_min is not None and d.figures.preemptions_per_min > 10


def test_a_tiny_batch_is_queue_bound() -> None:
    d = _run({"max_num_seqs": 2}, rate=10.0)
    assert "queue-bound" in [f.code for f in d.findings], d.figures


@pytest.mark.slow
def test_cli_with_engine_flags(sqlite_url: str) -> None:
    from slotune.collector.store import list_diagnoses, open_store, upgrade

    upgrade(sqlite_url)
    result = CliRunner().invoke(
        app,
        [
            "--db",
            sqlite_url,
            "diagnose",
            "sim",
            "--workload",
            "azure-conv",
            "--num-requests",
            "50",
            "--max-num-seqs",
            "16",
            "--enforce-eager",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["config"]["max_num_seqs"] == 16 and data["config"]["enforce_eager"] is True
    with open_store(sqlite_url) as store:
        assert [d.result for d in list_diagnoses(store, kind="simulated")] == [data]
    bad = CliRunner().invoke(
        app,
        ["--db", sqlite_url, "diagnose", "sim", "--workload", "azure-conv", "--max-num-seqs", "x"],
    )
    assert bad.exit_code == 1 and "max-num-seqs" in bad.output
