"""``slotune sim calibrate``: recovering known factors, the overlay, bad measured input."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from slotune.collector.errors import ConfigError
from slotune.collector.observed import ObservedRequest, observed_lines, read_observed
from slotune.collector.workload import retime
from slotune.collector.workload.synthetic import Column, parse_length_spec, synthetic_trace
from slotune.tuner.sim import VllmConfig
from slotune.tuner.sim.calibration.measured import CalibrationReport, calibrate
from slotune.tuner.sim.catalog import CATALOG_ENV, Efficiency, _loader, get_gpu, load_catalog_file
from slotune.tuner.sim.config import ResolvedConfig, resolve
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.simulator import replay
from slotune.ui.cli import app

TRUE = Efficiency(compute=0.7, memory=0.8, step_overhead_s=3e-3)


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overlays loaded here must not leak into other tests' catalog."""
    monkeypatch.setattr(_loader, "_registry", None)
    monkeypatch.delenv(CATALOG_ENV, raising=False)


def _measured(config: ResolvedConfig, efficiency: Efficiency, n: int) -> list[dict[str, object]]:
    """Requests 'measured' on a GPU whose true factors are ``efficiency``."""
    trace = synthetic_trace(
        parse_length_spec("lognormal:6.5,0.8"),
        parse_length_spec("lognormal:5.0,0.7", column=Column.OUTPUT, field_name="--output-len"),
        n,
        seed=1,
    )
    trace = retime(trace, rate=6.0, seed=1)
    real = dataclasses.replace(config, gpu=dataclasses.replace(config.gpu, efficiency=efficiency))
    return list(observed_lines(replay(EngineCore.create(real), trace).records))


def _observed(lines: list[dict[str, object]]) -> list[ObservedRequest]:
    return [
        ObservedRequest(
            timestamp_s=float(d["timestamp"]),  # type: ignore[arg-type]
            input_tokens=int(d["input_tokens"]),  # type: ignore[call-overload]
            output_tokens=int(d["output_tokens"]),  # type: ignore[call-overload]
            ttft_ms=float(d["ttft_ms"]),  # type: ignore[arg-type]
            e2e_ms=float(d["e2e_ms"]),  # type: ignore[arg-type]
            tpot_ms=d.get("tpot_ms"),  # type: ignore[arg-type]
            line=i + 1,
        )
        for i, d in enumerate(lines)
    ]


@pytest.fixture(scope="module")
def report() -> CalibrationReport:
    config = resolve(VllmConfig(model="llama-3.1-8b", gpu="h100-sxm"))
    observed = _observed(_measured(config, TRUE, 600))
    return calibrate(config, observed, fitted_on="perturbed simulation")


def test_recovers_known_factors(report: CalibrationReport) -> None:
    # Stated tolerance: compute and memory efficiency within 15 %, the per-step host time
    # within 35 % (it trades off against the weights' read time, which is also per step).
    fitted = report.efficiency
    assert fitted.compute == pytest.approx(TRUE.compute, rel=0.15)
    assert fitted.memory == pytest.approx(TRUE.memory, rel=0.15)
    assert fitted.step_overhead_s == pytest.approx(TRUE.step_overhead_s, rel=0.35)


def test_held_back_error_improves(report: CalibrationReport) -> None:
    before, after = report.held_out_before, report.held_out_after
    assert before is not None and after is not None
    assert after.num_requests == 400 and report.num_fit == 200
    for metric in ("ttft", "tpot", "e2e"):
        assert abs(getattr(after, metric)) < abs(getattr(before, metric))
    assert abs(after.tpot) < 0.10 and abs(after.e2e) < 0.10 and abs(after.ttft) < 0.20


def test_overlay_round_trips_through_the_catalog(report: CalibrationReport, tmp_path: Path) -> None:
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(report.overlay()), encoding="utf-8")
    gpus, _ = load_catalog_file(path)
    assert gpus == ["h100-sxm"]
    loaded = get_gpu("h100-sxm")
    assert loaded.efficiency == report.efficiency
    assert dataclasses.replace(loaded, efficiency=Efficiency()) == report.config.gpu


def _write(tmp_path: Path, lines: list[dict[str, object]]) -> Path:
    path = tmp_path / "observed.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


GOOD = {"timestamp": 0.5, "input_tokens": 100, "output_tokens": 20, "ttft_ms": 30, "e2e_ms": 400}


@pytest.mark.parametrize(
    ("second", "message"),
    [
        ({k: v for k, v in GOOD.items() if k != "ttft_ms"}, ":2: field 'ttft_ms' is missing"),
        (GOOD | {"timestamp": -1.0}, ":2: field 'timestamp' is negative"),
        (GOOD | {"timestamp": 0.1}, ":2: timestamp 0.1 is before the previous line's 0.5"),
        (GOOD | {"ttft_ms": 500}, ":2: field 'ttft_ms' (500) is greater than 'e2e_ms' (400)"),
        (GOOD | {"output_tokens": 0}, ":2: field 'output_tokens' must be a whole number"),
        (GOOD | {"model": "qwen3-8b"}, ":2: field 'model' is 'qwen3-8b', not the model"),
    ],
)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, second: dict[str, object], message: str
) -> None:
    path = _write(tmp_path, [GOOD, second])
    with pytest.raises(ConfigError, match=re.escape(f"observed.jsonl{message}")):
        read_observed(path, model_names={"llama-3.1-8b"})


def test_too_few_requests_says_how_many() -> None:
    config = resolve(VllmConfig(model="llama-3.1-8b", gpu="h100-sxm"))
    observed = _observed([GOOD | {"timestamp": float(i)} for i in range(20)])
    with pytest.raises(ConfigError, match=r"20 requests are too few.*at least 90 are needed"):
        calibrate(config, observed, fitted_on="x.jsonl")


def test_cli_writes_overlay_that_sim_picks_up(tmp_path: Path) -> None:
    config = resolve(VllmConfig(model="llama-3.1-8b", gpu="h100-sxm"))
    observed = _write(tmp_path, _measured(config, TRUE, 150))
    out = tmp_path / "overlay.yaml"
    base = ["sim", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]
    runner = CliRunner()
    result = runner.invoke(
        app, [*base, "calibrate", "--observed", str(observed), "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["num_fit"] == 50 and data["num_held_out"] == 100
    assert out.is_file()
    bad = runner.invoke(app, [*base, "calibrate", "--observed", str(tmp_path / "none.jsonl")])
    assert bad.exit_code != 0 and "--out overlay.yaml is needed" in bad.output
    sim = runner.invoke(
        app,
        [
            *base,
            "--catalog",
            str(out),
            "--input-len",
            "200",
            "--output-len",
            "20",
            "--num-requests",
            "5",
            "--requests-out",
            str(tmp_path / "sim.jsonl"),
            "--json",
        ],
    )
    assert sim.exit_code == 0, sim.output
    lines = read_observed(tmp_path / "sim.jsonl")
    assert [r.request_id for r in lines] == ["0", "1", "2", "3", "4"]
    assert get_gpu("h100-sxm").efficiency.compute == pytest.approx(data["efficiency"]["compute"])
