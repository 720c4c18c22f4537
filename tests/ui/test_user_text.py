"""User text on the way out: paths with Rich markup print as they are, and --json is JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slotune.collector.store import upgrade
from slotune.ui.cli import app
from slotune.ui.cli._common import print_json


def test_json_output_has_no_nan(capsys: pytest.CaptureFixture[str]) -> None:
    print_json({"score": math.nan, "rows": [math.inf, 1.5, (-math.inf,)], "path": Path("[x]")})
    out = capsys.readouterr().out
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in --json output")) == {
        "score": None,
        "rows": [None, 1.5, [None]],
        "path": "[x]",
    }


def test_a_path_with_rich_markup_is_printed_as_it_is(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    upgrade(sqlite_url)
    monkeypatch.setenv("SLOTUNE_DB", sqlite_url)
    out = tmp_path / "[" / "x]"
    out.parent.mkdir()
    result = CliRunner().invoke(app, ["slo", "export", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote {out}" and out.is_file()
