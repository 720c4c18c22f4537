"""A whole study on the simulator: report, re-check, prescreen, export, CLI, store row."""

import dataclasses
import json

import optuna
import pytest
from typer.testing import CliRunner

from slotune.collector.errors import ConfigError
from slotune.collector.store import get_study, open_store, upgrade
from slotune.tuner import (
    BackendKind,
    Engine,
    ObjectiveKind,
    RunOptions,
    SamplerKind,
    StudySpec,
    export_study,
    list_studies_report,
    resume_study,
    show_study,
    tune_study,
)
from slotune.tuner.tune.study import open_storage
from slotune.ui.cli import app


def sim_spec(name: str, **changes) -> StudySpec:
    spec = StudySpec(
        name=name,
        backend=BackendKind.SIM,
        engine=Engine.VLLM,
        model="llama-3.1-8b",
        gpu="h100-sxm",
        workload="azure-conv",
        trace_file=None,
        slos=("ttft:p99<=500ms", "itl:p99<=50ms"),
        objective=ObjectiveKind.GOODPUT,
        trials=5,
        rate=4.0,
        num_requests=40,
        space={"gpu_memory_utilization": None},
        sampler=SamplerKind.TPE,
        heartbeat_s=2,
        recheck_k=0,
    )
    return dataclasses.replace(spec, **changes)


@pytest.fixture
def db(sqlite_url):
    upgrade(sqlite_url)
    return sqlite_url


@pytest.mark.slow
def test_sim_study_reports_best_default_gain_and_robust_value(db):
    report = tune_study(
        sim_spec("s", objective=ObjectiveKind.CAPACITY, rate=None, trials=4, recheck_k=2),
        db,
        RunOptions(recheck_seeds=1),
    ).to_dict()
    assert report["trials"] == 4
    assert report["default"]["number"] == 0
    assert report["default"]["params"]["max_num_seqs"] == 1024
    best = report["best"]
    assert best["robust"] and set(best["values_by_seed"]) == {"0", "1"}
    assert best["value"] == min(best["values_by_seed"].values())
    if report["default"]["feasible"]:
        assert report["gain"] == pytest.approx(best["value"] / report["default"]["value"])
    details = report["trial_details"]
    assert [t["number"] for t in details] == list(range(4))
    assert all(set(t["constraints"]) == {"ttft-p99", "itl-p99", "launch"} for t in details)
    # Stored: the store row carries status and result, and show/export read it back.
    store = open_store(db)
    info = get_study(store, "s")
    store.dispose()
    assert info is not None and info.status == "complete" and info.result["trials"] == 4
    assert show_study("s", db).to_dict()["best"] == best
    header, command = export_study("s", db, "vllm").split("\n", 1)
    assert header.startswith("# simulated: vllm serving llama-3.1-8b")
    assert command.startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")
    assert [s.name for s in list_studies_report(db)] == ["s"]


def test_prescreen_seeds_the_study_with_simulated_best(db):
    report = tune_study(
        sim_spec("p", trials=4),
        db,
        RunOptions(prescreen_k=2, prescreen_trials=6),
    ).to_dict()
    sources = [t["source"] for t in report["trial_details"]]
    assert sources[0] == "default" and sources.count("prescreen") >= 1
    assert report["prescreen"]["study"] == "p-prescreen"
    assert "trials_saved" in report["prescreen"]


def test_pareto_objective_reports_a_front(db):
    report = tune_study(
        sim_spec("f", objective=ObjectiveKind.PARETO, rate=4.0, trials=4, slos=("ttft:p99<=2s",)),
        db,
        RunOptions(),
    ).to_dict()
    assert report["value_names"] == ["output_token_throughput", "ttft_ms.p99"]
    front = report["pareto_front"]
    assert front and all(len(p["values"]) == 2 for p in front)


def test_same_name_twice_is_refused_with_the_fix(db):
    tune_study(sim_spec("dup", trials=1), db)
    with pytest.raises(ConfigError, match="resume"):
        tune_study(sim_spec("dup", trials=1), db)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"slos": ()}, "--slo"),
        ({"workload": None}, "--workload"),
        ({"trials": 0}, "--trials"),
    ],
)
def test_bad_options_name_the_fix(changes, message):
    with pytest.raises(ConfigError, match=message):
        sim_spec("x", **changes).validate()


def test_launch_without_a_command_starts_the_engines_own_server():
    spec = sim_spec("x", backend=BackendKind.LAUNCH)
    spec.validate()
    assert spec.launch_command.startswith("vllm serve ")
    assert "--port {port}" in spec.launch_command


def test_cli_tune_json_show_export_list(db):
    runner = CliRunner()
    out = runner.invoke(
        app,
        [
            "--db",
            db,
            "tune",
            "--backend",
            "sim",
            "--workload",
            "azure-conv",
            "--num-requests",
            "40",
            "--slo",
            "ttft:p99<=500ms",
            "--objective",
            "goodput",
            "--rate",
            "4",
            "--trials",
            "2",
            "--study",
            "cli",
            "--recheck",
            "0",
            "--param",
            "gpu_memory_utilization=-",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert {"best", "default", "trials", "feasible", "gain"} <= set(report)
    assert runner.invoke(app, ["--db", db, "tune", "show", "cli"]).exit_code == 0
    exported = runner.invoke(app, ["--db", db, "tune", "export", "cli", "--format", "vllm"])
    assert "\nvllm serve " in exported.stdout
    wrong = runner.invoke(app, ["--db", db, "tune", "export", "cli", "--format", "trtllm"])
    assert wrong.exit_code == 1 and "--format vllm" in wrong.output
    listed = runner.invoke(app, ["--db", db, "tune", "list", "--json"])
    assert [r["name"] for r in json.loads(listed.stdout)] == ["cli"]
    missing = runner.invoke(app, ["--db", db, "tune", "show", "nope"])
    assert missing.exit_code == 1 and "tune list" in missing.output


def test_no_feasible_configuration_is_explained(db):
    report = tune_study(
        sim_spec("none", trials=4, slos=("itl:p99<=1ms", "ttft:p99<=2s"), rate=2.0), db
    )
    assert report.feasible == 0 and report.best is None
    why = report.infeasibility
    assert why is not None
    closest = next(t for t in report.trial_details if t.number == why.closest)
    assert why.rate == closest.rate == 2.0
    itl, ttft = why.slos
    assert itl.spec == "itl:p99<=1ms" and not itl.met and itl.attainment < itl.objective
    # The SLO counts the pooled token gaps: its observed p99 is the run summary's itl p99.
    assert itl.observed_ms == pytest.approx(closest.summary.itl_ms.p99)
    assert ttft.met and ttft.observed_ms == pytest.approx(closest.summary.ttft_ms.p99)
    assert set(why.movers) <= set(closest.params)
    assert report.to_dict()["infeasibility"]["closest"] == why.closest


def test_resume_keeps_the_recheck_the_study_was_started_with(db):
    tune_study(sim_spec("kept", trials=2, recheck_k=0), db)
    assert resume_study("kept", db).robustness == []
    again = resume_study("kept", db, recheck_k=1)
    assert again.best is None or len(again.robustness) == 1


def test_show_gives_the_values_a_failed_trial_ran_not_optuna_indexes(db):
    tune_study(sim_spec("idx", trials=1), db)
    study = optuna.load_study(study_name="idx", storage=open_storage(db))
    # A trial whose worker died before it recorded its configuration: only Optuna's
    # parameters remain, and an ordered choice is stored as its position.
    study.add_trial(
        optuna.trial.create_trial(
            params={"max_num_batched_tokens": 1},
            distributions={"max_num_batched_tokens": optuna.distributions.IntDistribution(0, 6)},
            state=optuna.trial.TrialState.FAIL,
        )
    )
    failed = show_study("idx", db).to_dict()["trial_details"][-1]
    assert failed["state"] == "fail"
    assert failed["params"] == {"max_num_batched_tokens": 1024}
