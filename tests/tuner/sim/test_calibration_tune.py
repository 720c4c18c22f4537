"""``tune --calibrate-from RUN``: a stored bench run calibrates the study's simulator, and the
overlay is recorded with the study."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from _tools import SLOTUNE

from slotune.collector.bench import ArrivalSpec, BenchConfig, BenchResult, save_run
from slotune.collector.store import upgrade
from slotune.collector.summary import summarize
from slotune.collector.workload import retime
from slotune.collector.workload.synthetic import Column, parse_length_spec, synthetic_trace
from slotune.tuner.sim import VllmConfig
from slotune.tuner.sim.catalog import Efficiency, StepTerms
from slotune.tuner.sim.config import resolve
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.simulator import replay
from slotune.tuner.tune.study import load_spec

REPO = Path(__file__).resolve().parents[3]
# The GPU the run was "measured" on is slower than the bundled entry says.
HIDDEN = Efficiency(step_terms=StepTerms(step_s=2e-3, prefill_token_s=20e-6))


def _stored_run(url: str) -> int:
    """A bench run whose requests the simulator served on the hidden, slower GPU."""
    config = resolve(VllmConfig(model="llama-3.1-8b", gpu="h100-sxm"))
    real = dataclasses.replace(config, gpu=dataclasses.replace(config.gpu, efficiency=HIDDEN))
    trace = synthetic_trace(
        parse_length_spec("lognormal:6.5,0.8"),
        parse_length_spec("lognormal:5.0,0.7", column=Column.OUTPUT, field_name="--output-len"),
        150,
        seed=1,
    )
    records = replay(EngineCore.create(real), retime(trace, rate=6.0, seed=1)).records
    now = time.time()
    result = BenchResult(
        records=tuple(records),
        summary=summarize(records),
        offered_rate=6.0,
        achieved_rate=6.0,
        config=BenchConfig(
            url="http://127.0.0.1:9",
            arrival=ArrivalSpec.from_rate(6.0),
            input_len="lognormal:6.5,0.8",
            output_len="lognormal:5.0,0.7",
        ),
        model="llama-3.1-8b",
        started_at=now,
        ended_at=now,
        wall_offset_s=now,
    )
    return save_run(url, result, "measured")


@pytest.mark.slow
def test_tune_calibrates_from_a_bench_run_and_records_the_overlay(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    run_id = _stored_run(url)
    env = os.environ | {"XDG_DATA_HOME": str(tmp_path / "data")}
    args = ["--db", url, "tune", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]
    args += ["--workload", "azure-conv", "--num-requests", "30", "--trials", "2"]
    args += ["--slo", "ttft:p99<=5s", "--study", "calibrated", "--calibrate-from", str(run_id)]
    tune = subprocess.run(
        [SLOTUNE, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert tune.returncode == 0, tune.stderr
    overlay = tmp_path / "data" / "slotune" / "calibrations" / "calibrated.yaml"
    assert f"overlay {overlay}" in tune.stdout.replace("\n", "")
    entry = yaml.safe_load(overlay.read_text("utf-8"))["gpus"][0]
    assert entry["id"] == "h100-sxm" and entry["calibrated"]["beats_prior"] is True
    assert entry["efficiency"]["step_terms"]["step_s"] > 0  # the slower GPU was learnt
    # Recorded with the study's spec, so every worker, and a resume, loads it.
    assert load_spec("calibrated", url).catalog == (str(overlay),)
