"""Capacity plans on a bundled trace, through the library and the CLI."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from slotune.collector.errors import ConfigError
from slotune.collector.slo import parse_slos
from slotune.collector.store import list_diagnoses, open_store, upgrade
from slotune.collector.workload.traces import Trace, TraceRequest
from slotune.tuner.fleet.capacity import mean_rate, peak_rate, plan_capacity
from slotune.tuner.fleet.pools import parse_pool
from slotune.tuner.fleet.prices import gpu_prices
from slotune.tuner.sim.simulator import load_workload
from slotune.ui.cli import app

SLOS = parse_slos(["ttft:p99<=1s", "tpot:p99<=60ms"])


def test_plan_sizes_each_pool_from_its_replica_capacity_and_prices_it() -> None:
    trace = load_workload(workload="azure-code", rate=40, num_requests=1500)
    pool = parse_pool("all:1:llama-3.1-8b:h100-sxm:--max-num-seqs 128")
    plan = plan_capacity(
        [pool], trace, SLOS, gpu_prices(["h100-sxm=2"]), rate=40, sample_requests=300
    )
    for layout in filter(None, (plan.one_pool, plan.split)):
        for p in layout.pools:
            assert p.capacity_rps > 0
            assert p.replicas == math.ceil(40 * p.request_share * 1.2 / p.capacity_rps)
            assert p.cost_per_hour == 2 * p.gpus
        assert layout.gpus == sum(p.replicas for p in layout.pools)
    data = plan.to_dict()
    assert data["gpus"] == plan.best.gpus
    assert sum(data["replicas"].values()) == data["gpus"]
    assert data["split_pays"] == (
        plan.split is not None and plan.split.cost_per_hour < plan.one_pool.cost_per_hour
    )
    assert plan.split is not None and plan.split.threshold_tokens


def test_peak_rate_is_the_busiest_minute() -> None:
    trace = load_workload(workload="azure-conv")
    mean = len(trace) / trace.duration_s
    assert mean < peak_rate(trace) < 5 * mean


def test_the_peak_is_never_below_the_mean() -> None:
    # steady 40.25 req/s for just over a minute: every 60-s window holds a little less than
    # the whole trace's mean, by its edges
    n = 2456
    trace = Trace("steady", tuple(TraceRequest(i / 40.25, 100, 10) for i in range(n)))
    assert peak_rate(trace) >= mean_rate(trace) == pytest.approx(40.25, rel=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"slos": []}, "needs at least one --slo"),
        ({"prices": ["h100-sxm=cheap"]}, "--gpu-price 'h100-sxm=cheap'"),
        ({"headroom": -1}, "--headroom -1"),
        ({"slos": parse_slos(["ttft:p99<=1ms"])}, "no --pool meets"),
    ],
)
def test_bad_plans_name_the_field(kwargs: dict[str, object], message: str) -> None:
    trace = load_workload(workload="azure-code", num_requests=200)
    with pytest.raises(ConfigError, match=message):
        plan_capacity(
            [parse_pool("a:1:llama-3.1-8b:h100-sxm")],
            trace,
            kwargs.get("slos", SLOS),  # type: ignore[arg-type]
            gpu_prices(kwargs.get("prices", [])),  # type: ignore[arg-type]
            headroom=kwargs.get("headroom", 0.2),  # type: ignore[arg-type]
            sample_requests=100,
            split_threshold=1000,
        )


def test_plan_capacity_cli_json_is_stored(store_url: str) -> None:
    upgrade(store_url)
    args = ["--db", store_url, "plan", "capacity", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]
    args += ["--workload", "azure-code", "--num-requests", "300", "--rate", "20"]
    args += ["--slo", "ttft:p99<=1s", "--sample-requests", "100", "--split-threshold", "3000"]
    result = CliRunner().invoke(app, [*args, "--json", "--max-num-seqs", "64"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["gpus"] >= 1 and data["one_pool"]["replicas"] == {"all": data["one_pool"]["gpus"]}
    with open_store(store_url) as store:
        (stored,) = list_diagnoses(store, kind="fleet-plan")
    assert stored.result == data


def test_plan_capacity_cli_bad_flag_is_one_line() -> None:
    args = ["plan", "capacity", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--no-store"]
    result = CliRunner().invoke(
        app, [*args, "--workload", "azure-code", "--slo", "ttft:p99<=1s", "--max-num-seq", "4"]
    )
    assert result.exit_code == 1
    assert "unrecognized arguments: --max-num-seq" in result.output
