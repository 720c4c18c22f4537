"""The tuning page's read models: a dead worker's study is stopped with its reason, the trial
table names the SLO's own percentile and a column per parameter, Optuna's figures have named
axes."""

from __future__ import annotations

import pyarrow

from slotune.collector.store import WorkerInfo, WorkerState, upgrade
from slotune.tuner import ObjectiveKind, RunOptions, show_study, tune_study
from slotune.tuner.tune.dashboard import PARAM_PREFIX, study_figures, study_state, trial_rows
from slotune.tuner.tune.worker import WorkerView
from tests.tuner.test_tune_sim import sim_spec


def _view(state: str) -> WorkerView:
    info = WorkerInfo("s", 4242, "gpu-1", WorkerState.RUNNING, 100.0, 160.0)
    return WorkerView(info, state, state == "running")


def test_a_study_whose_worker_died_is_stopped_with_the_reason() -> None:
    dead = study_state("running", _view("died"))
    assert dead.status == "stopped"
    assert "pid 4242 on gpu-1" in dead.reason and "1970-01-01 00:02:40 UTC" in dead.reason
    assert study_state("running", _view("running")).status == "running"
    assert study_state("complete", _view("died")).status == "complete"
    assert study_state("running", None).reason == ""


def test_trial_table_and_figures_of_a_pareto_study(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    spec = sim_spec(
        "p", objective=ObjectiveKind.PARETO, slos=("ttft:p99<=500ms", "itl:p95<=50ms"), trials=4
    )
    tune_study(spec, sqlite_url, RunOptions())
    report = show_study("p", sqlite_url).to_dict()
    rows = trial_rows(report)
    assert len(rows) == 4
    columns = list(rows[0])
    assert "itl:p95<=50ms (measured, ms)" in columns  # the SLO's p95, not the table's p99
    params = [c for c in columns if c.startswith(PARAM_PREFIX)]
    assert params and all(
        c.removeprefix(PARAM_PREFIX) in report["trial_details"][1]["params"] for c in params
    )
    figs = study_figures("p", sqlite_url, report["value_names"])
    assert figs.pareto is not None
    titles = (figs.pareto.layout.xaxis.title.text, figs.pareto.layout.yaxis.title.text)
    assert titles == ("output throughput (tokens/s)", "TTFT p99 (ms)")
    assert figs.parallel is not None and figs.slices is not None


def test_parameter_columns_keep_one_type_so_the_table_converts_to_arrow() -> None:
    def trial(n: int, params: dict[str, object]) -> dict[str, object]:
        return {
            "number": n,
            "state": "COMPLETE",
            "source": "tpe",
            "values": [1.0],
            "feasible": True,
            "measurement": {},
            "params": params,
            "failure": None,
            "duration_s": 1.0,
        }

    report = {"trial_details": [trial(0, {"a": 8, "b": "auto"}), trial(1, {"b": 4, "c": True})]}
    rows = trial_rows(report)
    assert [r[f"{PARAM_PREFIX}a"] for r in rows] == [8, None]  # missing: a blank cell
    assert [r[f"{PARAM_PREFIX}b"] for r in rows] == ["auto", "4"]
    assert [r[f"{PARAM_PREFIX}c"] for r in rows] == [None, "True"]
    pyarrow.Table.from_pylist(rows)  # what st.dataframe does first
