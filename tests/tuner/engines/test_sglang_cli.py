"""SGLang from the command line: ``sim --engine sglang``, ``tune --engine sglang``, export."""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from slotune.collector.store import upgrade
from slotune.ui.cli import app


@pytest.fixture
def db(sqlite_url: str) -> str:
    upgrade(sqlite_url)
    return sqlite_url


def test_sim_takes_sglang_flags() -> None:
    result = CliRunner().invoke(
        app,
        [
            "sim",
            "--engine",
            "sglang",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--workload",
            "azure-conv",
            "--num-requests",
            "40",
            "--max-running-requests",
            "16",
            "--schedule-policy",
            "lpm",
            "--enable-mixed-chunk",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["summary"]["num_completed"] == 40
    config = data["config"]
    assert config["engine"] == "sglang"
    assert (config["max_running_requests"], config["schedule_policy"]) == (16, "lpm")
    assert config["enable_mixed_chunk"] is True


def test_tune_sglang_on_the_simulator_and_export_the_launch_command(db: str) -> None:
    runner = CliRunner()
    out = runner.invoke(
        app,
        [
            "--db",
            db,
            "tune",
            "--engine",
            "sglang",
            "--backend",
            "sim",
            "--workload",
            "azure-conv",
            "--num-requests",
            "40",
            "--slo",
            "ttft:p99<=500ms",
            "--objective",
            "goodput",
            "--rate",
            "4",
            "--trials",
            "3",
            "--study",
            "sg",
            "--recheck",
            "0",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["trials"] == 3
    assert "chunked_prefill_size" in report["default"]["params"]
    exported = runner.invoke(app, ["--db", db, "tune", "export", "sg", "--format", "sglang"])
    assert exported.exit_code == 0, exported.output
    command = next(line for line in exported.stdout.splitlines() if not line.startswith("#"))
    argv = shlex.split(command)
    assert argv[:5] == [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "meta-llama/Llama-3.1-8B-Instruct",
    ]
    assert "--context-length" in argv
    wrong = runner.invoke(app, ["--db", db, "tune", "export", "sg", "--format", "vllm"])
    assert wrong.exit_code == 1 and "--format sglang" in wrong.output
