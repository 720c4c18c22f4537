"""Silicon CSV rows: read, mapped to engine configurations, simulated, and calibrated on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from slotune.collector.errors import ConfigError
from slotune.collector.silicon import read_silicon
from slotune.tuner.sim import VllmConfig
from slotune.tuner.sim.calibration.silicon_fit import calibrate_silicon, row_errors
from slotune.tuner.sim.catalog import StepTerms
from slotune.tuner.sim.silicon import SiliconCase, silicon_case, simulate_case
from slotune.ui.cli import app

SAMPLE = Path(__file__).parents[2] / "data" / "silicon" / "silicon_h100_sample.csv"


def _cases() -> list[SiliconCase]:
    out = []
    for row in read_silicon(SAMPLE):
        case = silicon_case(row)
        if not isinstance(case, str):
            out.append(case)
    return out


def test_rows_the_simulator_cannot_model_keep_their_reason() -> None:
    reasons = {
        row.row_id: case
        for row in read_silicon(SAMPLE)
        if isinstance(case := silicon_case(row), str)
    }
    assert len(reasons) == 2
    assert any("disagg" in r for r in reasons.values())
    assert any("fp4" in r for r in reasons.values())


def test_a_row_becomes_its_engine_model_and_layout() -> None:
    vllm = next(c for c in _cases() if c.row.engine == "vllm")
    assert isinstance(vllm.config, VllmConfig)
    assert vllm.config.tensor_parallel_size == 2
    # vLLM 0.12 predates async scheduling by default
    assert vllm.config.async_scheduling is False
    trtllm = next(c for c in _cases() if c.row.engine == "trtllm")
    assert trtllm.config.model == "llama-3.1-8b"


def test_simulated_rows_come_close_on_tpot() -> None:
    errors = row_errors(_cases(), StepTerms())
    assert errors.num_rows == 15
    assert errors.tpot_pct < 25.0


def test_a_row_with_a_bad_value_names_its_line_and_column(tmp_path: Path) -> None:
    text = SAMPLE.read_text().splitlines()
    header, first = text[0], text[1].split(",")
    first[header.split(",").index("osl")] = "-3"
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([header, ",".join(first)]) + "\n")
    with pytest.raises(ConfigError, match=r"line 2: osl"):
        read_silicon(bad)
    (tmp_path / "cols.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError, match="missing column"):
        read_silicon(tmp_path / "cols.csv")


def test_simulating_a_row_gives_its_steady_state_means() -> None:
    case = _cases()[0]
    sim = simulate_case(case)
    assert 0 < sim.ttft_ms < 10_000 and 0 < sim.tpot_ms < 1_000


@pytest.mark.slow
def test_a_fit_is_judged_on_rows_it_did_not_see() -> None:
    cases = [c for c in _cases() if c.row.engine == "trtllm"]
    result = calibrate_silicon(cases[::2], cases[1::2])
    assert result.judged_before.num_rows == len(cases[1::2])
    # never judged better while either median error grows
    if result.is_better:
        assert result.judged_after.tpot_pct <= result.judged_before.tpot_pct
        assert result.judged_after.ttft_pct <= result.judged_before.ttft_pct


def test_too_few_rows_or_none_to_judge_are_refused() -> None:
    cases = _cases()
    with pytest.raises(ConfigError, match="at least"):
        calibrate_silicon(cases[:1], cases[1:])
    with pytest.raises(ConfigError, match="no silicon rows left"):
        calibrate_silicon(cases, [])


@pytest.mark.slow
def test_sim_calibrate_silicon_from_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "overlay.yaml"
    result = CliRunner().invoke(
        app,
        ["sim", "calibrate", "--silicon", str(SAMPLE), "--out", str(out), "--force", "--json"],
    )
    assert result.exit_code in (0, 4), result.output
    data = json.loads(result.stdout)
    assert data["gpu"] == "h100-sxm" and data["judged"]["before"]["rows"] >= 1
    overlay = yaml.safe_load(out.read_text())
    assert overlay["gpus"][0]["calibrated"]["by"] == "slotune sim calibrate --silicon"
