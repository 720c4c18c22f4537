"""An incident through ``slotune alerts run`` into a real Alertmanager: the alert stays firing
there long past Alertmanager's ``resolve_timeout``, and resolves once the incident is fixed.

Alertmanager resolves an alert without ``endsAt`` that is not re-sent within its
``resolve_timeout`` (5 minutes by default). To compress time, the test's Alertmanager has a
1-second ``resolve_timeout`` and the evaluator re-sends every 2 s (``endsAt`` then 8 s
ahead): the alert must still be firing after fifteen resolve timeouts, well past the first
``endsAt``. Every time asserted
on is one recorded on the way (the first notification's arrival, the stored events).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from _tools import SLOTUNE
from alert_series import histogram
from alertmanager import running_alertmanager
from incident import SLOS_YAML, cumulative
from receiver import Receiver

from slotune.collector.alerts.promrules import ALERT_NAME
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.slo import parse_slo_yaml
from slotune.collector.store import (
    AlertState,
    alert_history,
    open_store,
    register_target,
    upgrade,
    write_samples,
)

RESOLVE_TIMEOUT_S = 1.0
WATCH_S = 15 * RESOLVE_TIMEOUT_S
WAIT_S = 300.0  # the most any step may take on a loaded machine; never reached when healthy
LABELS = {"alertname": ALERT_NAME, "slo": "chat-ttft", "severity": "page"}


def wait_for(what: str, found: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while (value := found()) is None:
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)
    return value


def notifications(receiver: Receiver) -> list[tuple[str, dict[str, str]]]:
    """(status, labels) of every alert in every webhook Alertmanager sent."""
    return [(a["status"], a["labels"]) for _, body in receiver.snapshot() for a in body["alerts"]]


def parse_ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.mark.slow
def test_alertmanager_keeps_the_alert_firing_and_resolves_it_after_the_fix(
    sqlite_url: str, tmp_path: Path
) -> None:
    upgrade(sqlite_url)
    points = cumulative(slow_minutes=30)
    start = time.time() - points[-1][0]  # the incident is going on now
    with open_store(sqlite_url) as store:
        register_target(store, "a", "vllm", "")
        write_samples(
            store,
            histogram("a", "ttft", [(start + t, {"0.5": g, "+Inf": n}) for t, g, n in points]),
        )
        apply_slos(store, parse_slo_yaml(SLOS_YAML))
    hook = Receiver()
    log = (tmp_path / "alerts-run.log").open("w")
    try:
        with running_alertmanager(
            tmp_path, hook.url, resolve_timeout=f"{RESOLVE_TIMEOUT_S:g}s"
        ) as am:
            evaluator = subprocess.Popen(
                [
                    SLOTUNE,
                    "--db",
                    sqlite_url,
                    "alerts",
                    "run",
                    "--interval",
                    "1s",
                    "--resend",
                    "2s",
                    "--scrape-interval",
                    "1s",
                    "--notify",
                    f"alertmanager={am.url}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                wait_for("the firing notification", lambda: notifications(hook) or None)
                first_at = time.monotonic()
                while time.monotonic() - first_at < WATCH_S:
                    time.sleep(0.1)
                (held,) = [a for a in am.alerts() if a["labels"] == LABELS]
                assert held["status"]["state"] == "active"
                assert all(status == "firing" for status, _ in notifications(hook))
                assert am.num_received() >= 2  # re-sent, as Prometheus does

                # the fix: the next minute's requests are all fast, many of them
                _, good, total = points[-1]
                with open_store(sqlite_url) as store:
                    fixed = {"0.5": good + 1e6, "+Inf": total + 1e6}
                    write_samples(store, histogram("a", "ttft", [(time.time(), fixed)]))
                resolved = wait_for(
                    "the resolved notification",
                    lambda: [n for n in notifications(hook) if n[0] == "resolved"] or None,
                )
                assert resolved == [("resolved", LABELS)]
                assert [a for a in am.alerts() if a["labels"] == LABELS] == []
            finally:
                evaluator.terminate()
                evaluator.wait(timeout=60)
    finally:
        hook.close()
        log.close()
    with open_store(sqlite_url) as store:
        events = alert_history(store, rule="chat-ttft:page")
    assert [e.event.state for e in events] == [AlertState.FIRING, AlertState.RESOLVED]
    assert events[1].event.ts - events[0].event.ts >= WATCH_S
    output = (tmp_path / "alerts-run.log").read_text()
    assert (
        "evaluated 1 instance(s): 1 firing; 1 change(s); sent 1\n" in output
        and "Traceback" not in output
    )
