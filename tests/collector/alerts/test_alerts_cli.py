"""``slotune slo apply`` with alerting and ``slotune alerts`` end to end through the CLI."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

from _tools import SLOTUNE, require_binary
from alert_series import steady
from receiver import Receiver
from typer.testing import CliRunner

from slotune.collector.alerts.promrules import ALERT_NAME
from slotune.collector.store import open_store, upgrade
from slotune.collector.views import SLOState, slo_statuses
from slotune.ui.cli import app

SLOS = """slos:
  - name: chat-ttft
    spec: ttft:p99<=300ms
    window: 1d
    alerting:
      windows:
        - {severity: page, long: 10m, short: 2m, factor: 10}
      labels: {team: serving}
"""


def slotune(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--db", url, *args])
    return result.exit_code, result.stdout, result.stderr


def test_slo_alert_fires_notifies_and_is_acked(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    now = time.time()
    with open_store(sqlite_url) as store:
        # half the requests above 1 s for the last 20 minutes: burn rate 50 against 1 %
        steady(store, "a", start=now - 1200, end=now, step=10, good_per_step=5, bad_per_step=5)
    slos = tmp_path / "slos.yaml"
    slos.write_text(SLOS)
    code, _, err = slotune(sqlite_url, "slo", "apply", str(slos))
    assert code == 0
    assert "300ms is not a bucket bound" in err and "nearest bounds 100ms and 500ms" in err

    code, out, _ = slotune(sqlite_url, "alerts", "evaluate", "--once", "--json")
    (status,) = json.loads(out)
    assert status["rule"] == "chat-ttft:page" and status["state"] == "firing"
    assert status["labels"] == {"team": "serving", "slo": "chat-ttft", "severity": "page"}
    assert status["value"] > 10

    receiver = Receiver()
    try:
        code, _, _ = slotune(
            sqlite_url,
            "alerts",
            "run",
            "--max-rounds",
            "1",
            "--notify",
            f"alertmanager={receiver.url}",
        )
        assert code == 0
        # the name of the exported Prometheus rule: Alertmanager sees one alert
        assert [b[0]["labels"]["alertname"] for _, b in receiver.bodies] == [ALERT_NAME]
        assert receiver.bodies[0][1][0]["annotations"]["rule"] == "chat-ttft:page"
    finally:
        receiver.close()

    code, out, _ = slotune(sqlite_url, "alerts", "history", "--json")
    (event,) = json.loads(out)
    assert event["state"] == "firing" and event["acked_at"] is None
    assert slotune(sqlite_url, "alerts", "ack", str(event["id"]), "--comment", "on it")[0] == 0
    code, out, _ = slotune(sqlite_url, "alerts", "history", "--json")
    assert json.loads(out)[0]["ack_comment"] == "on it"
    code, _, _ = slotune(sqlite_url, "alerts", "silence", "chat-ttft:page", "--for", "2h")
    code, out, _ = slotune(sqlite_url, "alerts", "list", "--json")
    assert json.loads(out)[0]["silenced_until"] > now + 7000


def test_bad_input_is_one_line_and_stores_nothing(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    slos = tmp_path / "slos.yaml"
    slos.write_text("slos:\n  - name: perfect\n    spec: ttft:p99<=500ms\n    objective: 100%\n")
    code, _, err = slotune(sqlite_url, "slo", "apply", str(slos))
    assert code == 1 and "no error budget" in err and "Traceback" not in err
    slos.write_text("slos:\n  - name: short\n    spec: ttft:p99<=500ms\n    window: 1h\n")
    code, _, err = slotune(sqlite_url, "slo", "apply", "--scrape-interval", "15s", str(slos))
    assert code == 1 and "shorter than the scrape interval 15s" in err
    assert json.loads(slotune(sqlite_url, "slo", "list", "--json")[1]) == []
    code, _, err = slotune(sqlite_url, "alerts", "add", "x", "kv_used > 0.9")
    assert code == 1 and "unknown metric 'kv_used'" in err
    code, _, err = slotune(sqlite_url, "alerts", "silence", "nope", "--for", "2h")
    assert code == 1 and "no alert rule named 'nope'" in err
    code, _, err = slotune(sqlite_url, "alerts", "evaluate", "--at", "yesterday")
    assert code == 1 and "--at 'yesterday'" in err
    code, _, err = slotune(
        sqlite_url, "alerts", "test-notify", "--notify", "slack=http://127.0.0.1:9/T/SECRET"
    )
    assert code == 1 and "SECRET" not in err and "unreachable" in err


def test_slo_export_prometheus(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    examples = Path(__file__).resolve().parents[3] / "examples" / "slos.yaml"
    assert slotune(sqlite_url, "slo", "apply", str(examples))[0] == 0
    out = tmp_path / "rules.yml"
    code, _, _ = slotune(sqlite_url, "slo", "export", "--format", "prometheus", "-o", str(out))
    assert code == 0
    text = out.read_text()
    assert "slo: chat-ttft" in text and "vllm:request_success_total" in text
    code, out_text, _ = slotune(sqlite_url, "slo", "export", "--engine", "trtllm", "chat-ttft")
    assert code == 0 and "trtllm_time_to_first_token_seconds_bucket" in out_text
    code, _, err = slotune(sqlite_url, "slo", "export", "--engine", "trtllm", "chat-itl")
    assert code == 1 and "trtllm exports no itl metric" in err
    code, _, err = slotune(sqlite_url, "slo", "export", "nope")
    assert code == 1 and "no SLO named 'nope'" in err
    promtool = require_binary("promtool", "prometheus")
    check = subprocess.run(
        [promtool, "check", "rules", str(out)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_deleting_an_slo_deletes_its_alert_rules(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    examples = Path(__file__).resolve().parents[3] / "examples" / "slos.yaml"
    assert slotune(sqlite_url, "slo", "apply", str(examples))[0] == 0
    assert slotune(sqlite_url, "alerts", "add", "kv", "kv_usage > 0.9")[0] == 0
    assert slotune(sqlite_url, "slo", "delete", "chat-ttft")[0] == 0
    names = {r["name"] for r in json.loads(slotune(sqlite_url, "alerts", "list", "--json")[1])}
    assert "chat-ttft:page" not in names and {"kv", "chat-itl:page", "errors:ticket"} <= names


def test_delete_a_threshold_rule(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    assert slotune(sqlite_url, "alerts", "add", "kv", "kv_usage > 0.9")[0] == 0
    assert slotune(sqlite_url, "alerts", "delete", "kv")[0] == 0
    code, _, err = slotune(sqlite_url, "alerts", "delete", "kv")
    assert code == 1 and "no threshold rule named 'kv'" in err


def test_an_slo_whose_data_stopped_shows_no_data(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    now = time.time()
    with open_store(sqlite_url) as store:
        # burning hard, but the agent stopped 10 minutes ago
        steady(
            store, "a", start=now - 1800, end=now - 600, step=10, good_per_step=5, bad_per_step=5
        )
    slos = tmp_path / "slos.yaml"
    slos.write_text(SLOS)
    assert slotune(sqlite_url, "slo", "apply", str(slos))[0] == 0
    code, out, _ = slotune(sqlite_url, "alerts", "evaluate", "--json")
    (status,) = json.loads(out)
    assert code == 0 and status["state"] == "no_data" and status["value"] is None
    assert re.search(
        r"no data: the newest sample of its series is (10m|1[01]m\d+s) old", status["message"]
    )
    code, out, _ = slotune(sqlite_url, "alerts", "evaluate")
    assert "no data" in out and " ok " not in out
    with open_store(sqlite_url) as store:
        (view,) = slo_statuses(store)
    # The alert cannot tell whether it still burns, but the budget it spent stays spent.
    assert view.state is SLOState.BREACHED and view.budget_shown == 0


def test_run_stops_cleanly_on_sigterm(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    out = tmp_path / "run.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [SLOTUNE, "--db", sqlite_url, "alerts", "run", "--interval", "1s"],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120  # generous: never reached unless something is wrong
        while "evaluated" not in out.read_text() and proc.poll() is None:
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
    text = out.read_text()
    assert "stopped on SIGTERM after" in text
    assert "Traceback" not in text
