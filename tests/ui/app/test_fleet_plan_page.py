"""The ``/fleet-plan`` page on results stored by the real fleet commands."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner
from ui_pages import RunPage, assert_clean, texts

from slotune.collector.store import list_diagnoses, open_store, save_diagnosis, upgrade
from slotune.collector.views.fleet_plans import FLEET_KINDS, autoscale_plan, fleet_results
from slotune.ui.cli import app

SIM_POOLS = ["--pool", "short:2:llama-3.1-8b:h100-sxm", "--pool", "long:1:llama-3.1-8b:h100-sxm"]
WORKLOAD = ["--workload", "azure-conv", "--slo", "ttft:p99<=2s"]


def _cli(url: str, *args: str) -> None:
    result = CliRunner().invoke(app, ["--db", url, *args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def fleet_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite store holding one result of each fleet command (simulate, capacity, autoscale)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('fleet-plan') / 'slotune.db'}"
    upgrade(url)
    policies = "round-robin,least-requests,length-pools"
    _cli(url, "fleet", "simulate", *SIM_POOLS, *WORKLOAD, "--num-requests", "200",
         "--policy", policies)  # fmt: skip
    _cli(url, "plan", "capacity", *SIM_POOLS, *WORKLOAD, "--num-requests", "200",
         "--sample-requests", "100")  # fmt: skip
    # A schedule scales for sure: 1 → 3 replicas at 20 s, back to 1 from 60 s.
    _cli(url, "plan", "autoscale", "--pool", "a:1:llama-3.1-8b:h100-sxm", *WORKLOAD,
         "--num-requests", "300", "--scaling", "schedule:0=1,20=3,60=1", "--scaling", "waiting:2",
         "--cold-start", "5s", "--cooldown", "10s", "--interval", "5s", "--burst", "10s")  # fmt: skip
    return url


def _id(url: str, kind: str) -> str:
    with open_store(url) as store:
        (row,) = list_diagnoses(store, kind=kind)
    return str(row.id)


def test_an_empty_store_says_how_to_fill_it(sqlite_url: str, run_page: RunPage) -> None:
    upgrade(sqlite_url)
    at = run_page("fleet_plan", sqlite_url)
    assert_clean(at)
    assert "`slotune fleet simulate`" in at.info[0].value
    assert not at.dataframe


@pytest.mark.slow
def test_lists_every_fleet_result_newest_first(fleet_url: str, run_page: RunPage) -> None:
    at = run_page("fleet_plan", fleet_url)
    assert_clean(at)
    listing = at.dataframe[0].value
    assert list(listing["kind"]) == ["fleet-autoscale", "fleet-plan", "fleet-sim"]
    assert "short:2:llama-3.1-8b:h100-sxm" in listing["subject"].iloc[2]
    assert at.selectbox[0].value == _id(fleet_url, "fleet-autoscale")  # the newest by default


@pytest.mark.slow
def test_simulation_ranks_policies_by_goodput_with_units(fleet_url: str, run_page: RunPage) -> None:
    at = run_page("fleet_plan", fleet_url, query={"result": _id(fleet_url, "fleet-sim")})
    assert_clean(at)
    table = at.dataframe[1].value
    assert set(table["policy"]) == {"round-robin", "least-requests", "length-pools"}
    goodput = list(table["goodput (req/s)"])
    assert goodput == sorted(goodput, reverse=True) and goodput[0] > 0
    for column in ("TTFT p50 (ms)", "TTFT p99 (ms)", "ITL p99 (ms)", "TPOT p99 (ms)",
                   "E2E p99 (ms)", "prefix hit (%)", "shed (%)", "GPU-hours (GPU·h)"):  # fmt: skip
        assert column in table.columns
    assert (table["TTFT p99 (ms)"] >= table["TTFT p50 (ms)"]).all()
    assert len(at.get("vega_lite_chart")) == 1  # goodput per policy
    replicas = at.dataframe[2].value
    assert list(replicas["replica"]) == ["short-0", "short-1", "long-0"]
    assert replicas["requests"].sum() == 200
    assert at.selectbox[1].value == table["policy"].iloc[0]


@pytest.mark.slow
def test_simulation_replica_load_follows_the_policy_in_the_url(
    fleet_url: str, run_page: RunPage
) -> None:
    query = {"result": _id(fleet_url, "fleet-sim"), "policy": "length-pools"}
    at = run_page("fleet_plan", fleet_url, query=query)
    assert_clean(at)
    assert at.selectbox[1].value == "length-pools"
    at = at.selectbox[1].select("round-robin").run()  # picking another one keeps it in the URL
    assert_clean(at)
    assert at.query_params["policy"] in ("round-robin", ["round-robin"])
    assert list(at.dataframe[2].value["requests"]) == [67, 67, 66]  # each replica in turn


@pytest.mark.slow
def test_capacity_plan_shows_replicas_cost_and_verdict(fleet_url: str, run_page: RunPage) -> None:
    at = run_page("fleet_plan", fleet_url, query={"result": _id(fleet_url, "fleet-plan")})
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["GPUs at peak"].endswith(("GPU", "GPUs"))
    assert metrics["cost per hour"].startswith("$") and metrics["cost per hour"].endswith("/h")
    assert metrics["cost per million tokens"].endswith("/M tokens")
    verdict = [e.value for e in (*at.success, *at.info)]
    assert any(v.startswith(("The long/short split pays", "One pool is cheaper")) for v in verdict)
    pools = at.dataframe[1].value
    assert set(pools["layout"]) == {"one-pool", "split"}
    assert set(pools.loc[pools["layout"] == "split", "pool"]) == {"short", "long"}
    assert (pools["replicas"] >= 1).all() and "cost (USD/h)" in pools.columns
    assert "GPU prices as of 2025-06" in texts(at)


@pytest.mark.slow
def test_autoscale_shows_each_policy_and_the_replica_timeline(
    fleet_url: str, run_page: RunPage
) -> None:
    at = run_page("fleet_plan", fleet_url)  # the newest result: the autoscale replay
    assert_clean(at)
    table = at.dataframe[1].value
    assert list(table["scaling"]) == ["static", "schedule:0=1,20=3,60=1", "waiting:2"]
    for column in ("SLO violations (requests)", "shed (requests)", "GPU-hours (GPU·h)"):
        assert column in table.columns
    schedule = table.iloc[1]
    assert schedule["max replicas"] == 3 and schedule["grows first"] == "a"
    assert "Replicas over time (s)" in texts(at)
    assert len(at.get("vega_lite_chart")) == 1


@pytest.mark.slow
def test_autoscale_shows_the_shedding_margins_tried(fleet_url: str, run_page: RunPage) -> None:
    at = run_page("fleet_plan", fleet_url)
    assert_clean(at)
    assert "Load-shedding thresholds" in texts(at)
    verdict = [e.value for e in (*at.success, *at.info)]
    assert any(v.startswith(("Recommended: `slo-aware:least-requests:margin=", "No `slo-aware"))
               for v in verdict)  # fmt: skip
    margins = at.dataframe[2].value
    assert list(margins["margin (× TTFT budget)"]) == [0.25, 0.5, 0.75, 1.0, 1.5]
    assert all(0 <= x <= 100 for x in margins["absorbable burst shed (%)"])


@pytest.mark.slow
def test_the_timeline_steps_from_the_starting_fleet(fleet_url: str) -> None:
    with open_store(fleet_url) as store:
        (row,) = [d for d in fleet_results(store) if d.kind == "fleet-autoscale"]
    static, schedule, _ = autoscale_plan(row).timelines
    assert static == ()
    counts = [n for _, n in schedule]
    assert counts[0] == 1 and max(counts) == 3 and counts[-1] == 1
    times = [t for t, _ in schedule]
    assert times == sorted(times) and times[0] == 0.0


@pytest.mark.parametrize("kind", FLEET_KINDS)
def test_a_result_of_another_shape_is_one_message(
    sqlite_url: str, run_page: RunPage, kind: str
) -> None:
    upgrade(sqlite_url)
    with open_store(sqlite_url) as store:
        save_diagnosis(store, kind, {}, {"policies": [{"policy": "x"}]}, subject="old")
    at = run_page("fleet_plan", sqlite_url)
    assert not at.exception
    (error,) = at.error
    assert f"({kind}) lacks or mangles field" in error.value
    assert "run its command again" in error.value


def test_an_unknown_result_in_the_url_falls_back_to_the_newest(
    fleet_url: str, run_page: RunPage
) -> None:
    at = run_page("fleet_plan", fleet_url, query={"result": "999999"})
    assert_clean(at)
    assert at.selectbox[0].value == _id(fleet_url, "fleet-autoscale")
