"""What ``slo apply`` was told is kept with the SLO: its scrape interval (given once, not again
to ``alerts evaluate``), and a selector that matches no target says so."""

from __future__ import annotations

import json
import time
from pathlib import Path

from alert_series import steady
from typer.testing import CliRunner

from slotune.collector.store import open_store, slo_scrape_intervals, upgrade
from slotune.ui.cli import app

# A 3-hour SLO: the page rule's short window is 1.25 s, shorter than the agents' default 5 s
# interval, fine for agents that scrape every second.
SHORT_WINDOWS = """slos:
  - name: quick
    spec: ttft:p99<=500ms
    window: 3h
  - name: nowhere
    spec: ttft:p99<=500ms
    window: 1d
    selector: {target: no-such-engine}
"""


def slotune(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--db", url, *args])
    return result.exit_code, result.stdout, result.stderr


def test_the_scrape_interval_is_given_once(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    now = time.time()
    with open_store(sqlite_url) as store:
        steady(store, "a", start=now - 600, end=now, step=1, good_per_step=5, bad_per_step=0)
    slos = tmp_path / "slos.yaml"
    slos.write_text(SHORT_WINDOWS)
    code, _, err = slotune(sqlite_url, "slo", "apply", str(slos))
    assert code == 1 and "shorter than the scrape interval 5s" in err  # the default
    assert slotune(sqlite_url, "slo", "apply", str(slos), "--scrape-interval", "1s")[0] == 0
    with open_store(sqlite_url) as store:
        assert slo_scrape_intervals(store) == {"quick": 1.0, "nowhere": 1.0}
    code, out, _ = slotune(sqlite_url, "alerts", "evaluate", "--json")
    assert code == 0
    states = {s["rule"]: s for s in json.loads(out)}
    assert {s["state"] for r, s in states.items() if r.startswith("quick:")} == {"ok"}
    # Given again, the flag still wins: 5 s refuses the 3-hour SLO's short windows.
    code, out, _ = slotune(sqlite_url, "alerts", "evaluate", "--json", "--scrape-interval", "5s")
    assert code == 0
    assert {s["state"] for s in json.loads(out) if s["rule"].startswith("quick:")} == {"error"}


def test_a_selector_that_matches_no_target_says_so(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    now = time.time()
    with open_store(sqlite_url) as store:
        steady(store, "a", start=now - 600, end=now, step=10, good_per_step=5, bad_per_step=0)
    slos = tmp_path / "slos.yaml"
    slos.write_text(SHORT_WINDOWS)
    assert slotune(sqlite_url, "slo", "apply", str(slos), "--scrape-interval", "1s")[0] == 0
    code, out, _ = slotune(sqlite_url, "alerts", "evaluate", "--json")
    assert code == 0
    nowhere = [s for s in json.loads(out) if s["rule"].startswith("nowhere:")]
    assert nowhere and all(s["state"] == "no_data" for s in nowhere)
    assert all(
        "its selector (target=no-such-engine) matches no target (targets: a)" in s["message"]
        for s in nowhere
    )
