"""``slotune alerts run`` killed with SIGKILL, twice, then restarted: every notification is
delivered (at least once), none is lost.

300 threshold-rule instances start firing at once. The first evaluator is killed as soon as
the store holds an event (most likely while it is still recording the others); the second
one while its receiver holds the answer to the first delivery; the third runs to the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from _tools import SLOTUNE
from receiver import Receiver

from slotune.collector.alerts.rules import parse_rule
from slotune.collector.store import (
    SampleIn,
    alert_history,
    open_store,
    register_target,
    save_alert_rule,
    upgrade,
    write_samples,
)

NUM_TARGETS = 300
WAIT_S = 300.0  # generous: never reached unless something is wrong


def evaluator(url: str, receiver: Receiver, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(SLOTUNE, "--db", url, "alerts", "run", "--interval", "1s"),
            *("--notify", f"slack={receiver.url}", *extra),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def kill(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL


def num_events(url: str) -> int:
    with open_store(url) as store:
        return len(alert_history(store, limit=10 * NUM_TARGETS))


def delivered(receiver: Receiver) -> set[str]:
    """The firing lines the receiver got, duplicates merged."""
    return {
        line
        for _, body in receiver.snapshot()
        for line in body["text"].splitlines()
        if "*FIRING*" in line
    }


@pytest.mark.slow
def test_a_killed_evaluator_loses_no_notification(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    now = time.time()
    with open_store(sqlite_url) as store:
        for i in range(NUM_TARGETS):
            register_target(store, f"t{i:03d}", "vllm", "")
        write_samples(
            store,
            [SampleIn(f"t{i:03d}", "kv_usage", "gauge", {}, now, 0.95) for i in range(NUM_TARGETS)],
        )
        save_alert_rule(store, parse_rule("kv_usage > 0.9", name="kv-full").to_info())
    receiver = Receiver(hold_first=True)
    try:
        first = evaluator(sqlite_url, receiver)
        deadline = time.monotonic() + WAIT_S
        while num_events(sqlite_url) == 0 and first.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        kill(first)
        recorded_before_restart = num_events(sqlite_url)

        second = evaluator(sqlite_url, receiver)
        assert receiver.got_first.wait(timeout=WAIT_S)
        kill(second)  # the receiver got the batch, the evaluator never saw the answer
        receiver.release.set()

        third = evaluator(sqlite_url, receiver, "--max-rounds", "3")
        assert third.wait(timeout=WAIT_S) == 0
    finally:
        receiver.close()
    lines = delivered(receiver)
    assert len(lines) == NUM_TARGETS, (recorded_before_restart, len(lines))
    assert {line.split(": ")[2] for line in lines} == {f"t{i:03d}" for i in range(NUM_TARGETS)}
    assert num_events(sqlite_url) == NUM_TARGETS  # each change recorded once
