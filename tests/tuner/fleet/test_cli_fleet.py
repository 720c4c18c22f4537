"""``slotune fleet simulate`` through the real Typer app: JSON, the stored result, errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from slotune.collector.store import list_diagnoses, open_store, upgrade
from slotune.ui.cli import app

POOL = ["--pool", "a:2:llama-3.1-8b:h100-sxm"]
WORKLOAD = ["--workload", "mooncake-conversation", "--num-requests", "40"]


def test_fleet_simulate_json_one_entry_per_policy_stored_as_a_diagnosis(store_url: str) -> None:
    upgrade(store_url)
    result = CliRunner().invoke(
        app,
        [
            "--db",
            store_url,
            "fleet",
            "simulate",
            *POOL,
            *WORKLOAD,
            "--policy",
            "round-robin,prefix-affinity",
            "--slo",
            "ttft:p99<=2s",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {d["policy"] for d in data} == {"round-robin", "prefix-affinity"}
    for entry in data:
        for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "goodput", "prefix_hit_rate"):
            assert key in entry
        assert entry["num_requests"] == 40
        assert {r["name"] for r in entry["replicas"]} == {"a-0", "a-1"}
    assert data[0]["goodput"] >= data[1]["goodput"]
    with open_store(store_url) as store:
        (stored,) = list_diagnoses(store, kind="fleet-sim")
    assert stored.result["policies"] == data
    assert stored.inputs["policy"] == "round-robin,prefix-affinity"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "fastest"], "unknown policy 'fastest'"),
        (["--pool", "b:1:llama-3.1-70b:l4"], "--pool b: CUDA out of memory"),
        (["--policy", "score:prefx=2"], "unknown key prefx for score"),
        (["--policy", "length-pools:long=big:threshold=900"], "no pool named big; the pools are a"),
    ],
)
def test_fleet_simulate_bad_input_is_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["fleet", "simulate", *POOL, *WORKLOAD, "--no-store", *args])
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output
