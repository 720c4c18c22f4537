"""The forms that write: what a page stores is what the command line then reads; bad input
is one message on the page and stores nothing."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from _tools import SLOTUNE
from streamlit.testing.v1 import AppTest
from ui_pages import RunPage, assert_clean

from slotune.collector.store import (
    WorkerInfo,
    WorkerState,
    get_worker,
    list_alert_rules,
    open_store,
    save_worker,
    upgrade,
)


def _cli(url: str, *args: str) -> object:
    out = subprocess.run(
        [SLOTUNE, "--db", url, *args, "--json"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _click(at: AppTest, label: str) -> AppTest:
    button = next(b for b in at.button if b.label == label)
    return button.click().run()


def test_an_slo_saved_on_the_page_is_what_slo_list_shows(
    seeded_url: str, run_page: RunPage
) -> None:
    at = run_page("slos", seeded_url)
    at.text_input(key="slo_name").input("chat-itl")
    at.text_input(key="slo_spec").input("itl:p95<=50ms")
    at.text_input(key="slo_window").input("7d")
    at.text_input(key="slo_pool").input("chat")
    at = _click(at, "Save SLO")
    assert_clean(at)
    assert "saved SLO chat-itl (itl:p95<=50ms)" in at.success[0].value
    listed = {s["name"]: s for s in _cli(seeded_url, "slo", "list")}
    assert listed["chat-itl"]["spec"] == "itl:p95<=50ms"
    assert listed["chat-itl"]["window_s"] == 7 * 86400
    assert listed["chat-itl"]["selector"] == {"pool": "chat"}
    assert abs(listed["chat-itl"]["objective"] - 0.95) < 1e-12
    with open_store(seeded_url) as store:  # its burn-rate alerts, as `slo apply` stores them
        assert {"chat-itl:page", "chat-itl:ticket"} <= {r.name for r in list_alert_rules(store)}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("slo_spec", "ttft:p99<=500", "field 'spec': SLO 'ttft:p99<=500' is not understood"),
        ("slo_window", "30 days", "field 'window': '30 days' is not a duration"),
        ("slo_objective", "150%", "field 'objective': '150%' must be a fraction"),
    ],
)
def test_a_wrong_slo_field_is_one_message_and_stores_nothing(
    sqlite_url: str, run_page: RunPage, field: str, value: str, message: str
) -> None:
    upgrade(sqlite_url)
    at = run_page("slos", sqlite_url)
    at.text_input(key="slo_name").input("chat-ttft")
    at.text_input(key="slo_spec").input("ttft:p99<=500ms")
    at.text_input(key=field).input(value)
    at = _click(at, "Save SLO")
    assert not at.exception
    assert len(at.error) == 1
    assert message in at.error[0].value
    assert _cli(sqlite_url, "slo", "list") == []


@pytest.mark.slow
def test_deleting_an_slo_needs_the_confirmation(seeded_url: str, run_page: RunPage) -> None:
    at = run_page("slos", seeded_url)
    at.selectbox(key="slo_victim").select("code-e2e")
    at = _click(at, "Delete SLO")
    assert "tick 'yes, delete it'" in at.error[0].value
    assert len(_cli(seeded_url, "slo", "list")) == 2  # type: ignore[arg-type]
    at.checkbox(key="slo_sure").check()
    at = _click(at, "Delete SLO")
    assert_clean(at)
    assert [s["name"] for s in _cli(seeded_url, "slo", "list")] == ["chat-ttft"]


def test_a_rule_added_on_the_page_uses_the_cli_shorthand(
    seeded_url: str, run_page: RunPage
) -> None:
    at = run_page("alerts", seeded_url)
    at.text_input(key="rule_name").input("waiting")
    at.text_input(key="rule_expr").input("requests_waiting >> 10")
    at = _click(at, "Save rule")
    assert "is not understood" in at.error[0].value
    with open_store(seeded_url) as store:
        assert "waiting" not in [r.name for r in list_alert_rules(store)]
    at.text_input(key="rule_expr").input("requests_waiting > 10 for 2m")
    at = _click(at, "Save rule")
    assert_clean(at)
    with open_store(seeded_url) as store:
        rule = next(r for r in list_alert_rules(store) if r.name == "waiting")
    assert (rule.metric, rule.op, rule.threshold, rule.for_s) == (
        "requests_waiting",
        ">",
        10.0,
        120.0,
    )


def test_silence_ack_and_test_notification(seeded_url: str, run_page: RunPage) -> None:
    at = run_page("alerts", seeded_url)
    at.selectbox(key="silence_rule").select("code-e2e:ticket")
    at.text_input(key="silence_for").input("2 hours")
    at = _click(at, "Silence")
    assert "field 'for': '2 hours' is not a duration" in at.error[0].value
    at.text_input(key="silence_for").input("2h")
    at = _click(at, "Silence")
    assert_clean(at)
    at = _click(at, "Acknowledge")
    assert_clean(at)
    assert "acknowledged event 2" in at.success[0].value
    at = _click(at, "Send test notification")
    assert_clean(at)
    assert "sent a test alert" in at.success[0].value
    at.text_input(key="notify_spec").input("pager=nowhere")
    at = _click(at, "Send test notification")
    assert "'pager' is unknown" in at.error[0].value
    at = run_page("alerts", seeded_url)
    now, history = (d.value for d in at.dataframe)
    silenced = dict(zip(now["rule"], now["silenced until"], strict=True))
    assert silenced["code-e2e:ticket"] and not silenced["kv-full"]
    assert history["acknowledged"][0]
    listed = _cli(seeded_url, "alerts", "history")
    acked = {e["rule"]: e["acked_at"] for e in listed}
    assert acked["code-e2e:ticket"] is not None and acked["chat-ttft:page"] is None


def _wait_for_worker(url: str, name: str, limit_s: float = 240) -> WorkerInfo:
    deadline = time.monotonic() + limit_s
    with open_store(url) as store:
        while time.monotonic() < deadline:
            info = get_worker(store, name)
            if info is not None and info.state is not WorkerState.RUNNING:
                return info
            time.sleep(0.5)
    raise AssertionError(f"the worker of {name} did not finish in {limit_s} s")


def _fill_study(at: AppTest, name: str) -> None:
    at.text_input(key="study_name").input(name)
    at.number_input(key="study_trials").set_value(3)
    at.number_input(key="study_requests").set_value(100)
    at.number_input(key="study_recheck").set_value(0)
    at.text_area(key="study_slos").input("ttft:p99<=500ms")


@pytest.mark.slow
def test_a_study_started_on_the_page_runs_in_a_worker_and_is_listed(
    sqlite_url: str, run_page: RunPage
) -> None:
    upgrade(sqlite_url)
    at = run_page("tuning", sqlite_url)
    _fill_study(at, "page-study")
    at = _click(at, "Start study")
    assert_clean(at)
    assert "started in a worker process" in at.success[0].value
    info = _wait_for_worker(sqlite_url, "page-study")
    assert info.state is WorkerState.FINISHED, info.error
    assert info.pid != os.getpid()
    listed = _cli(sqlite_url, "tune", "list")
    assert [(s["name"], s["status"], s["trials"]) for s in listed] == [
        ("page-study", "complete", 3)
    ]
    # a reload (a fresh session) shows it, with its trials, figures and launch command
    at = run_page("tuning", sqlite_url, query={"study": "page-study"})
    assert_clean(at)
    trials = at.dataframe[1].value
    assert len(trials) == 3 and trials["source"][0] == "default"
    assert any("vllm serve" in c.value for c in at.code)


def test_an_unparsable_trace_upload_is_one_message_and_starts_nothing(
    sqlite_url: str, run_page: RunPage
) -> None:
    upgrade(sqlite_url)
    at = run_page("tuning", sqlite_url)
    _fill_study(at, "bad-trace")
    at.selectbox(key="study_workload").select("(upload a trace)")
    at.file_uploader(key="study_trace").upload(
        "broken.jsonl", b'{"timestamp": 0, "input_tok\n', "application/json"
    )
    at = _click(at, "Start study")
    assert not at.exception
    assert len(at.error) == 1 and "uploaded trace broken.jsonl" in at.error[0].value
    assert _cli(sqlite_url, "tune", "list") == []


@pytest.mark.slow
def test_a_dead_worker_is_said_so_with_the_way_to_resume(
    sqlite_url: str, run_page: RunPage
) -> None:
    upgrade(sqlite_url)
    at = run_page("tuning", sqlite_url)
    _fill_study(at, "dies")
    at = _click(at, "Start study")
    assert _wait_for_worker(sqlite_url, "dies").state is WorkerState.FINISHED
    with open_store(sqlite_url) as store:  # as if the process had been killed mid-study
        info = get_worker(store, "dies")
        assert info is not None
        save_worker(
            store,
            WorkerInfo(
                "dies",
                2**22 + 1,
                info.host,
                WorkerState.RUNNING,
                info.started_at,
                info.heartbeat_at,
            ),
        )
    at = run_page("tuning", sqlite_url, query={"study": "dies"})
    assert not at.exception
    assert len(at.error) == 1
    assert "died without finishing" in at.error[0].value
    assert "slotune tune resume dies" in at.error[0].value


@pytest.mark.slow
def test_cancel_stops_the_worker_and_leaves_the_study_resumable(
    sqlite_url: str, run_page: RunPage
) -> None:
    upgrade(sqlite_url)
    at = run_page("tuning", sqlite_url)
    _fill_study(at, "long-study")
    at.number_input(key="study_trials").set_value(500)
    at = _click(at, "Start study")
    assert_clean(at)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # the worker has created the study
        if _cli(sqlite_url, "tune", "list"):
            break
        time.sleep(0.5)
    at = run_page("tuning", sqlite_url, query={"study": "long-study"})
    assert_clean(at)
    at = _click(at, "Cancel study")
    assert not at.exception
    info = _wait_for_worker(sqlite_url, "long-study", limit_s=120)
    assert info.state is WorkerState.CANCELLED
    listed = _cli(sqlite_url, "tune", "list")
    assert [(s["name"], s["status"]) for s in listed] == [("long-study", "stopped")]
    at = run_page("tuning", sqlite_url, query={"study": "long-study"})
    assert "slotune tune resume long-study" in at.warning[0].value
