"""Notifiers and the dispatcher: what is sent when, from the store's outbox."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from alert_series import T0
from receiver import Receiver

from slotune.collector.alerts import notify
from slotune.collector.alerts.dispatch import Dispatcher
from slotune.collector.alerts.evaluator import RuleState, RuleStatus
from slotune.collector.alerts.notify import (
    AlertmanagerNotifier,
    NotifyError,
    SlackNotifier,
    make_notifier,
)
from slotune.collector.alerts.promrules import ALERT_NAME
from slotune.collector.errors import ConfigError
from slotune.collector.store import (
    AlertEventInfo,
    AlertRuleInfo,
    AlertState,
    Store,
    ack_event,
    pending_deliveries,
    record_alert_event,
    save_alert_rule,
)

RULE = "chat-ttft:page"
LABELS = {"slo": "chat-ttft", "severity": "page"}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def rule(store: Store) -> str:
    save_alert_rule(store, AlertRuleInfo(RULE, "slo_burn", slo_name="chat-ttft", severity="page"))
    return RULE


def status(state: RuleState, at: float, changed: AlertState | None = None) -> RuleStatus:
    return RuleStatus(
        rule=RULE,
        kind="slo_burn",
        severity="page",
        state=state,
        value=20.0,
        labels=LABELS,
        at_ts=at,
        message="burning",
        changed=changed,
    )


def record(store: Store, state: AlertState, at: float, receivers: list[str]) -> int:
    return record_alert_event(store, AlertEventInfo(RULE, state, at, 20.0, LABELS), receivers)


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def test_alertmanager_gets_what_prometheus_sends(
    store: Store, rule: str, receiver: Receiver
) -> None:
    am = AlertmanagerNotifier(receiver.url)
    d = Dispatcher(store, [am], interval_s=30, resend_s=60)
    record(store, AlertState.FIRING, T0, d.receivers)
    assert d.dispatch([status(RuleState.FIRING, T0, AlertState.FIRING)]).num_sent == 1
    assert d.dispatch([status(RuleState.FIRING, T0 + 30)]).num_sent == 0  # not due yet
    # still firing a resend interval later, with no data: sent again all the same
    assert d.dispatch([status(RuleState.NO_DATA, T0 + 60)]).num_sent == 1
    record(store, AlertState.RESOLVED, T0 + 90, d.receivers)
    assert d.dispatch([status(RuleState.OK, T0 + 90, AlertState.RESOLVED)]).num_sent == 1
    assert d.dispatch([status(RuleState.OK, T0 + 150)]).num_sent == 0
    bodies = [body[0] for path, body in receiver.snapshot() if path == "/api/v2/alerts"]
    first, again, resolved = bodies
    # the exported rule's name and labels: one alert, whoever sends it
    assert first["labels"] == {"alertname": ALERT_NAME, **LABELS}
    assert first["annotations"]["rule"] == RULE
    # endsAt 4 x max(evaluation interval, resend interval) ahead, as Prometheus
    assert ts(first["startsAt"]) == T0 and ts(first["endsAt"]) == T0 + 240
    assert ts(again["startsAt"]) == T0 and ts(again["endsAt"]) == T0 + 60 + 240
    assert again["labels"] == first["labels"]
    assert ts(resolved["endsAt"]) == T0 + 90


def test_people_get_a_firing_alert_once_then_after_renotify_unless_acked(
    store: Store, rule: str, receiver: Receiver
) -> None:
    slack = SlackNotifier(receiver.url)
    d = Dispatcher(store, [slack], interval_s=30, renotify_s=600)
    fired = record(store, AlertState.FIRING, T0, d.receivers)
    d.dispatch([status(RuleState.FIRING, T0, AlertState.FIRING)])
    d.dispatch([status(RuleState.FIRING, T0 + 60)])  # Alertmanager would get it; people not
    d.dispatch([status(RuleState.FIRING, T0 + 600)])  # re-notified
    ack_event(store, fired, "on it")
    d.dispatch([status(RuleState.FIRING, T0 + 1200)])
    texts = [body["text"] for _, body in receiver.snapshot()]
    assert len(texts) == 2 and all(t.startswith(":rotating_light: *FIRING* [page]") for t in texts)


def test_pending_events_survive_a_failing_receiver_and_a_restart(
    store: Store, rule: str, receiver: Receiver
) -> None:
    receiver.status = 500
    waits: list[float] = []
    slack = SlackNotifier(receiver.url + "/services/T000/B000/SECRETTOKEN", sleep=waits.append)
    d = Dispatcher(store, [slack], interval_s=30)
    record(store, AlertState.FIRING, T0, d.receivers)
    report = d.dispatch([status(RuleState.FIRING, T0, AlertState.FIRING)])
    assert len(receiver.snapshot()) == 3 and waits == [0.5, 1.0]
    assert report.num_sent == 0 and len(report.failures) == 1
    assert "SECRETTOKEN" not in report.failures[0]
    assert report.failures[0].startswith(f"slack receiver {receiver.url}/*** answered HTTP 500")
    record(store, AlertState.RESOLVED, T0 + 30, d.receivers)
    assert len(pending_deliveries(store, slack.key)) == 2
    # a new process: nothing in memory, the store says what is pending
    receiver.status = 200
    again = Dispatcher(store, [slack], interval_s=30)
    assert again.dispatch([status(RuleState.OK, T0 + 60)]).num_sent == 2
    assert pending_deliveries(store, slack.key) == []
    assert again.dispatch([status(RuleState.OK, T0 + 90)]).num_sent == 0
    (delivered,) = [body["text"] for _, body in receiver.snapshot()[3:]]
    assert delivered.splitlines() == [
        ":rotating_light: *FIRING* [page] chat-ttft:page: ",
        ":white_check_mark: *RESOLVED* [page] chat-ttft:page: ",
    ]


def test_an_event_recorded_without_a_receiver_is_sent_once_while_firing(
    store: Store, rule: str, receiver: Receiver
) -> None:
    slack = SlackNotifier(receiver.url)
    record(store, AlertState.FIRING, T0, [])  # e.g. `alerts evaluate --record`
    d = Dispatcher(store, [slack], interval_s=30, renotify_s=0)
    assert d.dispatch([status(RuleState.FIRING, T0 + 30)]).num_sent == 1
    assert d.dispatch([status(RuleState.FIRING, T0 + 60)]).num_sent == 0


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("alertmanager=http://[::1", "the URL is not valid (Invalid IPv6 URL)"),
        ("alertmanager=http://am:99999", "the URL is not valid (Port out of range 0-65535)"),
        ("slack=http://am:abc/T/SECRET", "the URL is not valid (Port could not be cast"),
        ("slack=ftp://host/x", "give an http(s) URL with a host"),
        ("alertmanager=http://", "give an http(s) URL with a host"),
        ("alertmanager=http://am:0", "port 0 cannot be connected to"),
        ("pager=http://x", "'pager' is unknown; use log"),
    ],
)
def test_bad_notifier_specs_are_one_clear_line(spec: str, reason: str) -> None:
    with pytest.raises(ConfigError) as e:
        make_notifier(spec)
    assert reason in str(e.value) and "\n" not in str(e.value) and "SECRET" not in str(e.value)


def test_notifier_specs() -> None:
    assert make_notifier("alertmanager=http://am:9093").key.startswith("alertmanager:")
    n = make_notifier("alertmanager=http://am:9093")
    assert isinstance(n, AlertmanagerNotifier) and n.url == "http://am:9093/api/v2/alerts"
    a, b = make_notifier("slack=http://h/T/ONE"), make_notifier("slack=http://h/T/TWO")
    assert a.key != b.key and "ONE" not in a.key


def test_test_notify_reports_a_failing_receiver_once(receiver: Receiver) -> None:
    receiver.status = 503
    n = SlackNotifier(receiver.url, sleep=lambda _: None)
    (problem,) = notify.test_alerts(n)
    assert "answered HTTP 503" in problem
    with pytest.raises(NotifyError):
        n.send([])
