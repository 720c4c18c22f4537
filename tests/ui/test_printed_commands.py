"""Commands slotune prints for the user to run work as printed: a diagnosis's tune command,
and the launch command a study exports (parsed as ``vllm serve`` of the current release
parses it)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slotune.collector.store import upgrade
from slotune.tuner.sim.flags import check_vllm_flags, parse_engine_flags
from slotune.ui.cli import app

# 24 requests, one of 3,120 tokens: a small study runs in seconds
LENGTHS = [(200, 20), (800, 60), (3000, 120)] * 8


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    lines = [
        json.dumps({"timestamp": 0.4 * i, "input_tokens": n_in, "output_tokens": n_out})
        for i, (n_in, n_out) in enumerate(LENGTHS)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run(args: list[str], db: str) -> str:
    result = CliRunner().invoke(app, args, env={"SLOTUNE_DB": db, "COLUMNS": "200"})
    assert result.exit_code == 0, (args, result.output)
    return result.stdout


@pytest.mark.slow
def test_the_tune_command_of_a_diagnosis_runs_as_printed(sqlite_url: str, trace: Path) -> None:
    upgrade(sqlite_url)
    data = json.loads(
        _run(["diagnose", "workload", str(trace), "--no-store", "--json"], sqlite_url)
    )
    commands = [f["tune_command"] for f in data["findings"] if f["tune_command"]]
    assert commands
    for command in commands:
        args = shlex.split(command)
        assert args[:2] == ["slotune", "tune"] and "--slo" in args
        _run([*args[1:], "--study", "from-diagnosis", "--json"], sqlite_url)
        break  # one study is enough: the commands differ only in their --param lines

    # its exported configuration is a vllm serve line the current release accepts, with a
    # context length that fits the workload's longest request
    exported = _run(["tune", "export", "from-diagnosis"], sqlite_url)
    (line,) = [ln for ln in exported.splitlines() if ln and not ln.startswith("#")]
    argv = shlex.split(line)
    assert argv[:2] == ["vllm", "serve"]
    flags = argv[3:]
    check_vllm_flags(flags)
    config = parse_engine_flags(flags, model="llama-3.1-8b", gpu="h100-sxm")
    assert config.max_model_len is not None
    assert config.max_model_len >= max(n_in + n_out for n_in, n_out in LENGTHS)


def test_a_diagnosis_tunes_against_the_slos_it_was_given(sqlite_url: str, trace: Path) -> None:
    upgrade(sqlite_url)
    out = _run(
        ["diagnose", "workload", str(trace), "--slo", "e2e:p99<=20s", "--no-store", "--json"],
        sqlite_url,
    )
    commands = [f["tune_command"] for f in json.loads(out)["findings"] if f["tune_command"]]
    assert commands and all("--slo 'e2e:p99<=20s'" in c for c in commands)
    assert not any("ttft:p99" in c for c in commands)


@pytest.mark.slow
def test_a_profiler_diagnosis_prints_tune_commands_that_run(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    trace = Path(__file__).parents[1] / "data" / "gputraces" / "hta_alexnet_a100_trace.json.gz"
    out = _run(["diagnose", "trace", str(trace), "--no-store", "--json"], sqlite_url)
    commands = [f["tune_command"] for f in json.loads(out)["findings"] if f["tune_command"]]
    assert commands and all("--workload azure-conv" in c for c in commands)
    args = shlex.split(commands[0])
    # as printed, with a one-trial budget so that the test stays short
    _run([*args[1:], "--trials", "1", "--num-requests", "40", "--study", "from-trace"], sqlite_url)
