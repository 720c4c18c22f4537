"""A real agent scraping an emulated engine, killed with SIGKILL: the stale-target rule pages
within its window, counted from the agent's last recorded scrape, and the target's other
rules say "no data" instead of vanishing or reading ok."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from _tools import SLOTUNE, running_emulator

from slotune.collector.alerts.evaluator import RuleState, evaluate_all
from slotune.collector.alerts.rules import parse_rule
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.alerts.thresholds import STALE_S
from slotune.collector.slo import parse_slo_yaml
from slotune.collector.store import (
    AlertState,
    alert_history,
    find_series,
    open_store,
    save_alert_rule,
    upgrade,
    values_at,
)

STALE_AFTER_S = 10.0
INTERVAL = ("--interval", "0.5s")
WAIT_S = 300.0  # generous: never reached unless something is wrong
SLOS = "slos:\n  - name: fleet-ttft\n    spec: ttft:p99<=500ms\n    window: 1d\n"


def newest_up(url: str) -> tuple[str, float] | None:
    with open_store(url) as store:
        refs = find_series(store, ["up"])
        points = values_at(store, [r.id for r in refs], time.time() + 3600)
    return max(((r.target, points[r.id][0]) for r in refs if r.id in points), default=None)


def test_a_killed_agent_pages_within_its_stale_window(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    with open_store(sqlite_url) as store:
        for name, expr in (
            ("target-stale", f"scrape_age_s > {STALE_AFTER_S:g}"),
            ("engine-down", "up == 0"),
        ):
            save_alert_rule(store, parse_rule(expr, name=name, severity="page").to_info())
    with running_emulator(tmp_path / "timings.jsonl", speedup=100) as engine:
        agent = subprocess.Popen(
            [SLOTUNE, "--db", sqlite_url, "agent", "--scrape", f"vllm={engine}", *INTERVAL],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + WAIT_S
            while (found := newest_up(sqlite_url)) is None:
                assert time.monotonic() < deadline and agent.poll() is None
                time.sleep(0.2)
        finally:
            os.kill(agent.pid, signal.SIGKILL)
            agent.wait(timeout=60)
    found = newest_up(sqlite_url)
    assert found is not None
    target, last_scrape = found  # the agent's last recorded scrape
    with open_store(sqlite_url) as store:
        apply_slos(store, parse_slo_yaml(SLOS))

        def state(rule: str, at: float) -> RuleState:
            (s,) = [s for s in evaluate_all(store, at) if s.rule == rule]
            return s.state

        assert state("target-stale", last_scrape + STALE_AFTER_S - 0.5) is RuleState.OK
        assert state("target-stale", last_scrape + STALE_AFTER_S + 0.5) is RuleState.FIRING
        assert state("engine-down", last_scrape + 1) is RuleState.OK
        gone = last_scrape + STALE_S + 1
        assert state("engine-down", gone) is RuleState.NO_DATA
        assert state("fleet-ttft:page", last_scrape + 1) is RuleState.OK
        assert state("fleet-ttft:page", gone) is RuleState.NO_DATA
        assert state("target-stale", gone) is RuleState.FIRING
        # the loop, evaluating every second from the last scrape on, records the page in
        # the first round past the window
        t = last_scrape
        while t < last_scrape + STALE_AFTER_S + 3:
            evaluate_all(store, t, record=True)
            t += 1.0
        (event,) = alert_history(store, rule="target-stale")
    assert event.event.state is AlertState.FIRING and event.event.labels["target"] == target
    assert last_scrape + STALE_AFTER_S < event.event.ts <= last_scrape + STALE_AFTER_S + 1
