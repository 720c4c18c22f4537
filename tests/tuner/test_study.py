"""Studies: resumable after a kill, shared by workers on one PostgreSQL database."""

import os
import signal
import subprocess
import time

import optuna
import pytest
import sqlalchemy
from _tools import SLOTUNE
from optuna.trial import TrialState

from slotune.collector.store import upgrade
from slotune.tuner import list_studies_report, resume_study, show_study
from slotune.tuner.tune.study import open_storage, quiet_optuna

SIM_ARGS = [
    "--backend",
    "sim",
    "--workload",
    "azure-conv",
    "--num-requests",
    "60",
    "--slo",
    "ttft:p99<=500ms",
    "--slo",
    "itl:p99<=50ms",
    "--recheck",
    "0",
    "--heartbeat",
    "1",
]


def trials_of(url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    with quiet_optuna():
        return optuna.load_study(study_name=name, storage=open_storage(url)).get_trials()


def wait_for(predicate, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


def mid_trial(url: str, name: str) -> bool:
    try:
        trials = trials_of(url, name)
    except KeyError:
        return False
    states = [t.state for t in trials]
    running = {t._trial_id for t in trials if t.state is TrialState.RUNNING}
    return states.count(TrialState.COMPLETE) >= 2 and bool(running & beating(url))


def beating(url: str) -> set[int]:
    """Trials that recorded a heartbeat. Optuna only fails a running trial as stale once it
    has one, so a worker killed before its first beat leaves a trial nothing retries."""
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sqlalchemy.text("SELECT trial_id FROM trial_heartbeats"))
            return {int(r[0]) for r in rows}
    finally:
        engine.dispose()


@pytest.mark.slow
def test_killed_study_resumes_without_losing_or_duplicating_trials(sqlite_url):
    upgrade(sqlite_url)
    proc = subprocess.Popen(
        [
            SLOTUNE,
            "--db",
            sqlite_url,
            "tune",
            *SIM_ARGS,
            # trials long enough that one read as running is still running at the kill
            "--num-requests",
            "500",
            "--trials",
            "6",
            "--study",
            "killed",
            "--json",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: mid_trial(sqlite_url, "killed"), 60)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    before = trials_of(sqlite_url, "killed")
    killed = [t for t in before if t.state is TrialState.RUNNING]
    assert len(killed) == 1
    # Nobody runs it any more: the listing says stopped, with the trials show counts.
    (listed,) = list_studies_report(sqlite_url)
    assert listed.status == "stopped"
    assert listed.trials == show_study("killed", sqlite_url).trials

    report = resume_study("killed", sqlite_url).to_dict()

    after = trials_of(sqlite_url, "killed")
    numbers = [t.number for t in after]
    assert len(numbers) == len(set(numbers))
    assert [t.state for t in after].count(TrialState.COMPLETE) == 6
    assert TrialState.RUNNING not in [t.state for t in after]
    # The killed trial failed and ran again with the parameters it had drawn (a kill while
    # it was still drawing leaves the rest to the retry).
    stale = next(t for t in after if t.number == killed[0].number)
    assert stale.state is TrialState.FAIL
    retried = [t for t in after if t.system_attrs.get("failed_trial") == stale.number]
    assert len(retried) == 1 and retried[0].params.items() >= stale.params.items()
    assert retried[0].state is TrialState.COMPLETE
    # Trials completed before the kill are kept as they were.
    for t in before:
        if t.state is TrialState.COMPLETE:
            assert next(a for a in after if a.number == t.number).values == t.values
    assert report["trials"] == 6 and report["default"]["number"] == 0


@pytest.mark.postgres
@pytest.mark.slow
def test_two_workers_share_one_postgres_study(pg_url):
    upgrade(pg_url)
    out = subprocess.run(
        [
            SLOTUNE,
            "--db",
            pg_url,
            "tune",
            *SIM_ARGS,
            "--trials",
            "6",
            "--study",
            "shared",
            "--workers",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    trials = trials_of(pg_url, "shared")
    numbers = [t.number for t in trials]
    assert len(numbers) == len(set(numbers))
    states = [t.state for t in trials]
    assert TrialState.RUNNING not in states and TrialState.WAITING not in states
    # Each worker checks the target before it starts a trial: at most one extra per worker.
    assert 6 <= states.count(TrialState.COMPLETE) <= 7
    report = show_study("shared", pg_url).to_dict()
    assert report["default"]["number"] == 0 and report["best"] is not None


@pytest.mark.slow
def test_two_studies_started_together_on_a_fresh_sqlite_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url)  # the store's own schema; Optuna's tables do not exist yet
    procs = [
        subprocess.Popen(
            [SLOTUNE, "--db", url, "tune", *SIM_ARGS, "--trials", "2", "--study", f"s{i}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    assert sorted(s.study_name for s in optuna.get_all_study_summaries(open_storage(url))) == [
        "s0",
        "s1",
    ]


@pytest.mark.slow
def test_a_second_worker_on_a_sqlite_study_is_refused_with_the_fix(sqlite_url):
    upgrade(sqlite_url)
    proc = subprocess.Popen(
        [SLOTUNE, "--db", sqlite_url, "tune", *SIM_ARGS, "--trials", "40", "--study", "busy"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: mid_trial(sqlite_url, "busy"), 60)
        second = subprocess.run(
            [SLOTUNE, "--db", sqlite_url, "tune", "resume", "busy"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert second.returncode == 1
    assert "already being run by another process" in second.stderr
    assert "PostgreSQL" in second.stderr and "Traceback" not in second.stderr
    many = subprocess.run(
        [SLOTUNE, "--db", sqlite_url, "tune", "resume", "busy", "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert many.returncode == 1 and "--workers 2 on a SQLite store" in many.stderr
