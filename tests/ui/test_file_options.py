"""Every file option of the command line, given a FIFO or ``/dev/zero``: one line naming what
the path is, at once (a FIFO used to hang the command, ``/dev/zero`` to fill memory)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slotune.collector.store import upgrade
from slotune.ui.cli import app

SIM = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm"]
# Each command line with FILE where the path goes; all of them read it before doing anything
# else, so nothing runs when the file is refused.
FILE_OPTIONS = {
    "slo apply": ["slo", "apply", "FILE"],
    "alerts apply": ["alerts", "apply", "FILE"],
    "agent --targets": ["agent", "--targets", "FILE"],
    "tune --space": ["tune", "--space", "FILE"],
    "route --config": ["route", "--config", "FILE"],
    "diagnose trace": ["diagnose", "trace", "FILE", "--no-store"],
    "diagnose workload": ["diagnose", "workload", "FILE", "--no-store"],
    "metrics import": ["metrics", "import", "FILE", "--target", "t"],
    "bench --trace": ["bench", "--url", "http://127.0.0.1:9", "--rate", "1", "--trace", "FILE"],
    "sim --trace": ["sim", *SIM, "--trace", "FILE"],
    "sim --extra_llm_api_options": [
        "sim",
        *SIM,
        "--engine",
        "trtllm",
        "--extra_llm_api_options",
        "FILE",
    ],
    "sim calibrate --observed": ["sim", "calibrate", *SIM, "--observed", "FILE", "--out", "o.yaml"],
    "fleet simulate --trace": [
        "fleet",
        "simulate",
        "--pool",
        "a:1:llama-3.1-8b:h100-sxm",
        "--trace",
        "FILE",
    ],
    "plan capacity --trace": ["plan", "capacity", *SIM, "--trace", "FILE"],
    "sim --catalog": ["sim", *SIM, "--catalog", "FILE"],
}


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("option", FILE_OPTIONS)
def test_a_file_option_refuses_what_is_not_a_regular_file(
    option: str,
    special: str,
    fifo: Path,
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upgrade(sqlite_url)
    monkeypatch.setenv("SLOTUNE_DB", sqlite_url)
    monkeypatch.chdir(tmp_path)
    path = str(fifo) if special == "fifo" else special
    argv = [path if a == "FILE" else a for a in FILE_OPTIONS[option]]
    result = CliRunner().invoke(app, argv)
    message = " ".join(result.output.split())
    kind = "a FIFO (named pipe)" if special == "fifo" else "a character device"
    assert result.exit_code == 1, message
    assert message.startswith("error:") and "Traceback" not in result.output
    assert f"{path}: is {kind}, not a file" in message, message


def test_a_fifo_in_a_directory_of_ranks_is_refused(fifo: Path) -> None:
    result = CliRunner().invoke(app, ["diagnose", "trace", str(fifo.parent), "--no-store"])
    assert result.exit_code == 1 and "is a FIFO (named pipe), not a file" in result.output
