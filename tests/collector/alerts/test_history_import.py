"""``slotune metrics import``: an OpenMetrics incident file replayed through the evaluator."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _tools import require_binary
from typer.testing import CliRunner

from slotune.collector.alerts.evaluator import RuleState, evaluate_all
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.slo import parse_slo_yaml
from slotune.collector.store import list_targets, open_store, upgrade
from slotune.ui.cli import app

T0 = 1_760_000_000
FAMILY = "vllm:time_to_first_token_seconds"


def incident(minutes: int = 30, bad_from: int = 20) -> str:
    """A vLLM engine scraped every 15 s: 100 requests a minute, all slow from ``bad_from``."""
    lines = [f"# TYPE {FAMILY} histogram", f"# HELP {FAMILY} TTFT."]
    good = total = 0.0
    for i in range(minutes * 4 + 1):
        ts = T0 + 15 * i  # a histogram's samples of one time stay together (OpenMetrics)
        for le, value in (("0.5", good), ("+Inf", total)):
            lines.append(f'{FAMILY}_bucket{{le="{le}",model_name="m"}} {value:g} {ts}')
        lines.append(f'{FAMILY}_count{{model_name="m"}} {total:g} {ts}')
        lines.append(f'{FAMILY}_sum{{model_name="m"}} {total * 0.3:g} {ts}')
        total += 25
        good += 0 if i >= bad_from * 4 else 25
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def slotune(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--db", url, *args])
    return result.exit_code, result.stdout, result.stderr


def test_import_then_replay_the_incident(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    path = tmp_path / "incident.om"
    path.write_text(incident())
    code, out, err = slotune(
        sqlite_url, "metrics", "import", str(path), "--target", "prod-1", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["scrapes"] == 121 and result["first_ts"] == T0
    with open_store(sqlite_url) as store:
        (target,) = list_targets(store)
        assert (target.name, target.kind) == ("prod-1", "vllm")
        slos = parse_slo_yaml("slos:\n  - name: ttft\n    spec: ttft:p99<=500ms\n    window: 1d\n")
        apply_slos(store, slos)
        # 1d window: page pairs (2 min & 10 s over 14.4x), (12 min & 1 min over 6x)
        before = evaluate_all(store, T0 + 20 * 60)
        after = evaluate_all(store, T0 + 22 * 60)
    state = {s.rule: s.state for s in before}
    assert state["ttft:page"] is RuleState.OK
    assert {s.rule: s.state for s in after}["ttft:page"] is RuleState.FIRING


def test_promtool_reads_the_same_file(tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    path = tmp_path / "incident.om"
    path.write_text(incident(minutes=2))
    result = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(path), str(tmp_path / "tsdb")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda t: t.replace(f" {T0 + 15}\n", f" {T0}\n", 1),
            "incident.om:7: a duplicate timestamp",
        ),
        (lambda t: t.replace(f" {T0 + 15}\n", f" {T0 - 15}\n", 1), "an out-of-order timestamp"),
        (
            lambda t: t.replace(f" {T0 + 15}\n", "\n", 1),
            "incident.om:7: sample without a timestamp",
        ),
        (
            lambda t: t.replace("# EOF\n", ""),
            "read as Prometheus text milliseconds falls in the year 1970, not between 1990 and 2200",
        ),
        (
            lambda t: t.replace(f" {T0 + 15}\n", f" {(T0 + 15) * 1000}\n", 1),
            "read as OpenMetrics seconds falls in the year 57,742",
        ),
        (lambda t: t.replace(f" {T0 + 15}\n", " NaN\n", 1), "timestamp 'NaN' is not a finite"),
        (lambda t: t.replace(f" {T0 + 15}\n", " +Inf\n", 1), "timestamp '+Inf' is not a finite"),
        (
            lambda t: t.replace("# EOF\n", "").replace(f" {T0}\n", f" {T0}000.5\n"),
            "is not whole milliseconds",
        ),
    ],
)
def test_bad_files_are_refused_and_store_nothing(
    sqlite_url: str, tmp_path: Path, mutate: object, message: str
) -> None:
    upgrade(sqlite_url)
    path = tmp_path / "incident.om"
    path.write_text(mutate(incident(minutes=1)))  # type: ignore[operator]
    code, _, err = slotune(sqlite_url, "metrics", "import", str(path), "--target", "x")
    assert code == 1 and message in err, err
    with open_store(sqlite_url) as store:
        assert list_targets(store) == []


def test_prometheus_text_timestamps_are_milliseconds(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    text = incident(minutes=1).replace("# EOF\n", "")
    for i in range(5):
        text = text.replace(f" {T0 + 15 * i}\n", f" {(T0 + 15 * i) * 1000}\n")
    path = tmp_path / "incident.prom"
    path.write_text(text)
    code, out, err = slotune(sqlite_url, "metrics", "import", str(path), "--target", "t", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert (result["first_ts"], result["last_ts"], result["scrapes"]) == (T0, T0 + 60, 5)


@pytest.mark.parametrize(
    ("name", "message"),
    [("", "--target is empty"), (" ", "--target is empty"), ("n" * 201, "201 characters")],
)
def test_empty_and_over_long_target_names_are_refused(
    sqlite_url: str, tmp_path: Path, name: str, message: str
) -> None:
    upgrade(sqlite_url)
    path = tmp_path / "incident.om"
    path.write_text(incident(minutes=1))
    code, _, err = slotune(sqlite_url, "metrics", "import", str(path), "--target", name)
    assert code == 1 and message in err and "Traceback" not in err, err
    with open_store(sqlite_url) as store:
        assert list_targets(store) == []


def test_a_target_name_with_markup_is_printed_as_written(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    path = tmp_path / "incident.om"
    path.write_text(incident(minutes=1))
    code, out, err = slotune(sqlite_url, "metrics", "import", str(path), "--target", "[/x]")
    assert code == 0, err
    assert "scrapes of [/x]" in out
