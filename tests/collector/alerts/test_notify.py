from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from alert_series import T0

from slotune.collector.alerts.evaluator import RuleState, RuleStatus
from slotune.collector.alerts.notify import (
    AlertmanagerNotifier,
    Dispatcher,
    NotifyError,
    SlackNotifier,
    make_notifier,
)
from slotune.collector.store import AlertState


class Receiver:
    """A real HTTP receiver on 127.0.0.1 that records JSON bodies and answers ``status``."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, Any]] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                receiver.bodies.append((self.path, json.loads(self.rfile.read(length))))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def status(state: RuleState, changed: AlertState | None, at: float) -> RuleStatus:
    return RuleStatus(
        rule="chat-ttft:page",
        kind="slo_burn",
        severity="page",
        state=state,
        value=20.0,
        labels={"slo": "chat-ttft", "severity": "page"},
        at_ts=at,
        message="burning",
        changed=changed,
    )


def test_alertmanager_payloads_firing_renotify_and_resolve(receiver: Receiver) -> None:
    d = Dispatcher([AlertmanagerNotifier(receiver.url)], renotify_s=600)
    assert d.dispatch([status(RuleState.FIRING, AlertState.FIRING, T0)]) == []
    d.dispatch([status(RuleState.FIRING, None, T0 + 30)])  # no change, not due: nothing sent
    d.dispatch([status(RuleState.FIRING, None, T0 + 600)])  # due again
    d.dispatch([status(RuleState.OK, AlertState.RESOLVED, T0 + 700)])
    assert [path for path, _ in receiver.bodies] == ["/api/v2/alerts"] * 3
    first, again, resolved = (body[0] for _, body in receiver.bodies)
    assert first["labels"] == {
        "alertname": "chat-ttft:page",
        "slo": "chat-ttft",
        "severity": "page",
    }
    assert first["startsAt"].endswith("Z") and "endsAt" not in first
    assert again["labels"] == first["labels"]
    assert resolved["endsAt"] == resolved["startsAt"]


def test_acknowledged_alerts_are_not_renotified(receiver: Receiver) -> None:
    d = Dispatcher([SlackNotifier(receiver.url)], renotify_s=60)
    s = status(RuleState.FIRING, AlertState.FIRING, T0)
    d.dispatch([s])
    key = ("chat-ttft:page", tuple(sorted(s.labels.items())))
    d.dispatch([status(RuleState.FIRING, None, T0 + 120)], acked={key})
    assert len(receiver.bodies) == 1
    assert receiver.bodies[0][1]["text"].startswith(":rotating_light: *FIRING* [page]")


def test_a_failing_receiver_is_retried_and_its_token_never_shown(receiver: Receiver) -> None:
    receiver.status = 500
    waits: list[float] = []
    n = SlackNotifier(receiver.url + "/services/T000/B000/SECRETTOKEN", sleep=waits.append)
    with pytest.raises(NotifyError) as e:
        n.send([status(RuleState.FIRING, AlertState.FIRING, T0)])
    assert len(receiver.bodies) == 3 and waits == [0.5, 1.0]
    assert "SECRETTOKEN" not in str(e.value)
    assert str(e.value).startswith(f"slack receiver {receiver.url}/*** answered HTTP 500")
    d = Dispatcher([n])
    failures = d.dispatch([status(RuleState.FIRING, AlertState.FIRING, T0)])
    assert len(failures) == 1 and "SECRETTOKEN" not in failures[0]


def test_notifier_specs() -> None:
    assert make_notifier("alertmanager=http://am:9093").url == "http://am:9093/api/v2/alerts"
    with pytest.raises(Exception, match="unknown; use log"):
        make_notifier("pager=http://x")
