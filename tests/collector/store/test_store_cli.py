"""``slotune db`` and ``slotune slo`` end to end through the real command line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slotune.collector.store import SampleIn, open_store, write_samples
from slotune.ui.cli import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "slos.yaml"


def slotune(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--db", url, *args])
    return result.exit_code, result.stdout, result.stderr


def test_upgrade_apply_list_delete(store_url: str) -> None:
    code, out, _ = slotune(store_url, "db", "upgrade")
    assert code == 0 and "up to date" in out
    code, out, _ = slotune(store_url, "db", "current", "--json")
    assert json.loads(out)["up_to_date"] is True
    code, out, _ = slotune(store_url, "slo", "apply", str(EXAMPLES))
    assert code == 0 and "applied 5 SLO(s)" in out
    code, out, _ = slotune(store_url, "slo", "list", "--json")
    listed = {s["name"]: s for s in json.loads(out)}
    assert listed["chat-ttft"]["spec"] == "ttft:p99<=500ms"
    assert listed["batch-e2e"]["objective"] == pytest.approx(0.995)
    assert slotune(store_url, "slo", "delete", "errors")[0] == 0
    code, _, err = slotune(store_url, "slo", "delete", "errors")
    assert code == 1 and "no SLO named 'errors'" in err
    code, out, _ = slotune(store_url, "slo", "list")
    assert "chat-itl" in out and "errors" not in out


def test_malformed_slo_file_changes_nothing(sqlite_url: str, tmp_path: Path) -> None:
    slotune(sqlite_url, "db", "upgrade")
    slotune(sqlite_url, "slo", "apply", str(EXAMPLES))
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "slos:\n  - name: chat-ttft\n    spec: ttft:p99<=100ms\n"
        "  - name: broken\n    spec: ttft<=1s\n",
        encoding="utf-8",
    )
    code, _, err = slotune(sqlite_url, "slo", "apply", str(bad))
    assert code == 1
    assert err.count("\n") == 1 and f"{bad}:5:" in err and "accepted forms" in err
    code, out, _ = slotune(sqlite_url, "slo", "list", "--json")
    assert {s["name"]: s["spec"] for s in json.loads(out)}["chat-ttft"] == "ttft:p99<=500ms"


def test_commands_refuse_an_old_schema(sqlite_url: str) -> None:
    slotune(sqlite_url, "db", "upgrade")
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    db.execute("UPDATE slotune_alembic_version SET version_num = 'ffff'")
    db.commit()
    db.close()
    code, _, err = slotune(sqlite_url, "slo", "list")
    assert code == 1 and "revision ffff" in err and "upgrade slotune" in err
    code, out, _ = slotune(sqlite_url, "db", "current", "--json")
    assert code == 0 and json.loads(out)["current"] == "ffff"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:////nonexistent/dir/x.db", "no SQLite database at /nonexistent/dir/x.db"),
        ("postgresql+psycopg://u:hunter2@127.0.0.1:1/db", "cannot connect to the database"),
        ("http://example.org", "'http' in http://example.org is not supported"),
    ],
)
def test_bad_urls_give_one_line(url: str, message: str) -> None:
    code, _, err = slotune(url, "slo", "list")
    assert code == 1 and message in err and "hunter2" not in err
    assert err.count("\n") == 1


def test_prune_with_rollup(store_url: str) -> None:
    slotune(store_url, "db", "upgrade")
    with open_store(store_url) as store:
        write_samples(
            store,
            [SampleIn("e1", "kv_usage", "gauge", {}, 1_000_000.0 + 5 * i, 0.5) for i in range(24)],
        )
    code, out, _ = slotune(
        store_url, "db", "prune", "--older-than", "30d", "--rollup-after", "2d", "--json"
    )
    assert code == 0
    report = json.loads(out)
    assert report["pruned"]["samples"] == 24
    assert report["rolled_up"]["samples"] == 0
    code, _, err = slotune(store_url, "db", "prune", "--older-than", "soon")
    assert code == 1 and "--older-than" in err


def test_user_text_in_an_error_is_printed_not_read_as_markup(tmp_path: Path) -> None:
    missing = tmp_path / "[" / "x].db"
    code, _, err = slotune(f"sqlite:///{missing}", "slo", "list")
    assert code == 1
    assert err == (
        f"error: no SQLite database at {missing}; create it with "
        f"`slotune --db 'sqlite:///{missing}' db upgrade` or fix the path\n"
    )
