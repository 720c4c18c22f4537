"""Bad study input is one clear line before any trial, and nothing is stored."""

from __future__ import annotations

import optuna
import pytest
from typer.testing import CliRunner

from slotune.collector.errors import ConfigError
from slotune.collector.store import upgrade
from slotune.tuner import Engine, list_studies_report, space_overrides
from slotune.tuner.tune.backends.launch import render_command
from slotune.tuner.tune.study import open_storage, study_names
from slotune.ui.cli import app

BASE = [
    "tune",
    "--workload",
    "azure-conv",
    "--num-requests",
    "30",
    "--slo",
    "ttft:p99<=500ms",
    "--trials",
    "3",
    "--recheck",
    "0",
    "--study",
    "bad",
]


@pytest.fixture
def db(sqlite_url: str) -> str:
    upgrade(sqlite_url)
    return sqlite_url


def stored_studies(db: str) -> list[str]:
    return study_names(db) + [r.name for r in list_studies_report(db)]


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--param", "bogus=1"], 1, "--param bogus: not a vllm parameter"),
        (["--param", "max_num_seqs=abc"], 1, "--param max_num_seqs: 'abc' is not an integer"),
        (["--param", "unknown=1,2"], 1, "--param unknown: not a vllm parameter"),
        (["--param", "enable_prefix_caching=1"], 1, "is not true or false"),
        (["--rate", "0"], 2, "--rate must be a number greater than 0"),
        (["--rate", "nan"], 2, "--rate must be a number greater than 0"),
        (["--workers", "0"], 2, "--workers"),
        (["--speedup", "inf"], 2, "--speedup must be finite"),
        (["--backend", "launch", "--command", "vllm serve {model"], 1, "--command"),
        (["--backend", "launch", "--command", "vllm serve 'x {port}"], 1, "close every quote"),
        (["--backend", "launch", "--command", "x {nope}"], 1, "unknown placeholder"),
        (
            [
                "--backend",
                "attach",
                "--endpoint",
                "http://127.0.0.1:9",
                "--param",
                "max_num_seqs=8",
            ],
            1,
            "--backend attach measures the server as it runs and cannot apply max_num_seqs",
        ),
        (
            ["--backend", "attach", "--endpoint", "http://127.0.0.1:9", "--prescreen", "sim"],
            1,
            "--backend attach cannot apply to a running server",
        ),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(
    db: str, extra: list[str], code: int, message: str
) -> None:
    out = CliRunner().invoke(app, ["--db", db, *BASE, *extra])
    assert out.exit_code == code, out.output
    assert message in " ".join(out.output.split())
    assert "Traceback" not in out.output
    assert stored_studies(db) == []


def test_trials_that_all_fail_to_start_alike_stop_the_study_with_the_reason(db: str) -> None:
    args = ["--db", db, *BASE, "--engine", "trtllm", "--model", "llama-3.1-70b", "--trials", "12"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 1, out.output
    text = " ".join(out.output.split())
    assert "failed to start in each of the first 3 trials" in text
    assert "needs 131.42 GiB of weights per GPU" in text and "tensor_parallel_size=N" in text
    trials = optuna.load_study(study_name="bad", storage=open_storage(db)).get_trials()
    assert len(trials) == 3


def test_tp_size_is_tensor_parallel_size() -> None:
    assert space_overrides(Engine.TRTLLM, None, ["tp_size=4"]) == {"tensor_parallel_size": 4}
    with pytest.raises(ConfigError, match="already given"):
        space_overrides(Engine.TRTLLM, None, ["tp_size=4", "tensor_parallel_size=2"])


def test_command_template_is_checked_when_rendered() -> None:
    argv = render_command(
        "vllm serve {hf_model} --port {port} {engine_args}",
        model="llama-3.1-8b",
        gpu="h100-sxm",
        port=8000,
        engine_args="--max-num-seqs 64",
    )
    assert argv == [
        "vllm",
        "serve",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--port",
        "8000",
        "--max-num-seqs",
        "64",
    ]
