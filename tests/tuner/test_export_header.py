"""An exported configuration says what it was measured on, and warns when it did not beat the
default beyond the spread between repeats."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from slotune.tuner.demo import Capacity, _best_at_least_default
from slotune.tuner.tune.export import export_config, model_in_argv
from slotune.tuner.tune.report import BestTrial, DefaultTrial, StudyReport
from slotune.tuner.tune.run import export_header


@pytest.mark.parametrize(
    ("argv", "model"),
    [
        (["vllm", "serve", "/m/tiny", "--port", "1"], "/m/tiny"),
        (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "./tiny"], "./tiny"),
        (["python", "-m", "sglang.launch_server", "--model-path=org/x"], "org/x"),
        (["/usr/bin/trtllm-serve", "org/y", "--port", "2"], "org/y"),
        (["vllm", "serve", "--port", "1"], None),
    ],
)
def test_the_model_a_command_serves(argv: list[str], model: str | None) -> None:
    assert model_in_argv(argv) == model


def test_the_export_names_the_model_that_was_served() -> None:
    text = export_config(
        {"max_num_seqs": 2},
        engine="vllm",
        model="llama-3.1-8b",
        gpu="h100-sxm",
        fmt="vllm",
        served_model="/models/tiny llama",
    )
    assert text.startswith("vllm serve '/models/tiny llama' ")
    assert "meta-llama" not in text


def _report(gain: float | None, note: str | None, default_feasible: bool = True) -> StudyReport:
    best = BestTrial(number=1, params={}, config={}, value=6.0, robust=False)
    default = DefaultTrial(0, {}, {}, 5.9, default_feasible, None)
    fields: dict[str, Any] = {f.name: None for f in dataclasses.fields(StudyReport) if f.init}
    fields.update(
        name="s",
        backend="launch",
        engine="vllm",
        model="llama-3.1-8b",
        gpu="h100-sxm",
        best=best,
        default=default,
        gain=gain,
        gain_note=note,
        robustness=[],
        importance={},
        trial_details=[],
    )
    return StudyReport(**fields)


def test_a_configuration_within_noise_is_marked_loudly() -> None:
    noise = _report(None, "within noise: the best's worst run does not beat the default's")
    header = export_header(noise, "/m/tiny")
    assert header.startswith("# measured on launched engines: vllm serving /m/tiny, GPU h100-sxm")
    assert "# WARNING: not better than the default" in header and "within noise" in header
    assert "WARNING" not in export_header(_report(1.4, None), "/m/tiny")
    assert "WARNING" not in export_header(_report(None, "infeasible", False), None)


def _capacity(label: str, number: int, rate: float) -> Capacity:
    return Capacity(label, number, {}, rate, True, [])


def test_the_demos_best_is_never_below_the_default() -> None:
    said: list[str] = []
    default, worse = _capacity("default", 0, 15.75), _capacity("best", 2, 6.0)
    kept = _best_at_least_default([default, worse], said.append)
    assert [(c.label, c.number, c.sim_rate) for c in kept] == [
        ("default", 0, 15.75),
        ("best", 0, 15.75),
    ]
    assert "the default stays the best" in said[0]
    better = _capacity("best", 2, 20.0)
    assert _best_at_least_default([default, better], said.append) == [default, better]


def test_the_progress_line_gives_an_eta_from_the_trials_so_far() -> None:
    from slotune.ui.cli.tune import eta_text

    assert eta_text(0.0, 0, 2) == "ETA after the first trial"
    assert eta_text(300.0, 1, 2) == "ETA 10m00s"
    assert eta_text(20.0, 2, 1) == "ETA 10s"
    assert eta_text(20.0, 2, 0) == ""
