"""The alert evaluator service of docker-compose.yml."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import yaml
from typer.testing import CliRunner

from slotune.collector.alerts.notify import make_notifier
from slotune.ui.cli import app

ROOT = Path(__file__).resolve().parents[3]


def test_the_evaluator_runs_the_alert_loop_after_the_migration() -> None:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
    assert list(jsonschema.Draft7Validator(schema).iter_errors(data)) == []
    alerts = data["services"]["alerts"]
    assert alerts["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "@postgres:5432/" in alerts["environment"]["SLOTUNE_DB"]
    command = [re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", c) for c in alerts["command"]]
    assert command[:2] == ["alerts", "run"]
    make_notifier(command[command.index("--notify") + 1])
    help_text = CliRunner().invoke(app, ["alerts", "run", "--help"], terminal_width=200).stdout
    for option in (c for c in command if c.startswith("--")):
        assert option in help_text, option
