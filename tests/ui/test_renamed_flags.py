"""Renamed flags: the old spelling still works for one release, with one warning line."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from slotune.ui.cli import app


def test_agent_target_kind_url_is_now_scrape() -> None:
    result = CliRunner().invoke(app, ["agent", "--once", "--target", "vllm=http://[/x]"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == "warning: --target KIND=URL is deprecated; use --scrape"
    assert "target URL 'http://[/x]' is not a URL" in result.stderr
    new = CliRunner().invoke(app, ["agent", "--once", "--scrape", "vllm=http://[/x]"])
    assert new.exit_code == 1 and "deprecated" not in new.stderr
    assert "target URL 'http://[/x]' is not a URL" in new.stderr


def test_bench_model_is_now_served_model_name(tmp_path: Path) -> None:
    argv = ["bench", "--url", "http://127.0.0.1:9", "--no-store", "--trace", str(tmp_path / "x")]
    old = CliRunner().invoke(app, [*argv, "--model", "m"])
    assert old.stderr.splitlines()[0] == "warning: --model is deprecated; use --served-model-name"
    new = CliRunner().invoke(app, [*argv, "--served-model-name", "m"])
    assert "deprecated" not in new.stderr
    assert old.exit_code == new.exit_code == 1
    assert old.stderr.splitlines()[1:] == new.stderr.splitlines()


def test_a_slotune_error_is_one_line_and_exit_code_1() -> None:
    result = CliRunner().invoke(app, ["sim", "--model", "no-such-model", "--gpu", "h100-sxm"])
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
