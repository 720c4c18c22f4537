"""Closed-loop simulation (``--concurrency``), fp8 weights and the host overlap of a step."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.tuner.engines.sglang import SglangConfig
from slotune.tuner.sim import TrtllmConfig, VllmConfig, simulate
from slotune.tuner.sim.cost import StepShape
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.simulator import load_workload, replay_timings, steady_state
from slotune.ui.cli import app

M, G = "llama-3.1-8b", "h100-sxm"


def _trace(n: int = 60, isl: str = "512", osl: str = "64") -> object:
    return load_workload(input_len=isl, output_len=osl, num_requests=n)


def test_a_closed_loop_never_holds_more_than_its_concurrency() -> None:
    core = EngineCore.create(VllmConfig(model=M, gpu=G))
    timings = replay_timings(core, _trace(), concurrency=4)  # type: ignore[arg-type]
    events = sorted(
        [(t.arrival_s, 1) for t in timings] + [(t.finished_s or 0.0, -1) for t in timings],
        key=lambda e: (e[0], e[1]),
    )
    in_flight = peak = 0
    for _, change in events:
        in_flight += change
        peak = max(peak, in_flight)
    assert len(timings) == 60 - 2 * 4
    assert peak <= 4


def test_more_concurrency_means_longer_steps() -> None:
    low = simulate(VllmConfig(model=M, gpu=G), _trace(120), concurrency=2)  # type: ignore[arg-type]
    high = simulate(VllmConfig(model=M, gpu=G), _trace(120), concurrency=32)  # type: ignore[arg-type]
    tpot = [r.summary.to_dict()["tpot_ms"]["mean"] for r in (low, high)]
    assert tpot[1] > tpot[0]
    load = high.summary.to_dict()
    assert load["num_warmup"] == 32 and load["num_cooldown"] == 32 and load["num_sent"] == 120


def test_too_few_requests_for_a_steady_state_names_the_option() -> None:
    with pytest.raises(ConfigError, match="--num-requests"):
        steady_state(20, 8)
    with pytest.raises(ConfigError, match="--concurrency"):
        steady_state(20, 0)


@pytest.mark.parametrize(
    ("config", "fp8"),
    [
        (VllmConfig(model=M, gpu=G), VllmConfig(model=M, gpu=G, quantization="fp8")),
        (SglangConfig(model=M, gpu=G), SglangConfig(model=M, gpu=G, quantization="fp8")),
        (TrtllmConfig(model=M, gpu=G), TrtllmConfig(model=M, gpu=G, quantization="fp8")),
    ],
)
def test_fp8_weights_free_kv_room_and_speed_up_decode(config: object, fp8: object) -> None:
    bf16_core, fp8_core = EngineCore.create(config), EngineCore.create(fp8)  # type: ignore[arg-type]
    assert fp8_core.capacity.weights_bytes < 0.6 * bf16_core.capacity.weights_bytes
    assert fp8_core.capacity.num_blocks > bf16_core.capacity.num_blocks
    decode = [c.cost.step_time_s(0, 0.0, 8, 8 * 1024, 0) for c in (bf16_core, fp8_core)]
    prefill = [c.cost.step_time_s(4096, 4096 * 2048.0, 0, 0, 1) for c in (bf16_core, fp8_core)]
    assert decode[1] < decode[0]
    assert prefill[1] < prefill[0]


def test_an_unknown_quantization_is_refused_by_every_engine() -> None:
    with pytest.raises(ConfigError):
        EngineCore.create(VllmConfig(model=M, gpu=G, quantization="awq"))
    with pytest.raises(EngineConfigError, match="--quantization awq"):
        EngineCore.create(SglangConfig(model=M, gpu=G, quantization="awq"))
    with pytest.raises(ConfigError):
        EngineCore.create(TrtllmConfig(model=M, gpu=G, quantization="int4"))


def test_async_scheduling_hides_the_host_time_of_a_step() -> None:
    overlapped = EngineCore.create(VllmConfig(model=M, gpu=G)).cost
    serial = EngineCore.create(VllmConfig(model=M, gpu=G, async_scheduling=False)).cost
    args = (0, 0.0, 16, 16 * 1024, 0)
    assert overlapped.step_time_s(*args) < serial.step_time_s(*args)
    shape = StepShape(num_decode_seqs=16, decode_context_tokens=16 * 1024)
    assert overlapped.step_time(shape).total_s == pytest.approx(overlapped.step_time_s(*args))


def test_sim_concurrency_from_the_cli_reports_the_steady_state() -> None:
    result = CliRunner().invoke(
        app,
        [
            "sim", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-len", "256",
            "--output-len", "16", "--num-requests", "40", "--concurrency", "8",
            "--quantization", "fp8", "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["summary"]
    assert summary["num_requests"] == 40 - 16
    assert summary["num_warmup"] == 8
    bad = CliRunner().invoke(
        app,
        ["sim", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-len", "256",
         "--output-len", "16", "--num-requests", "10", "--concurrency", "8"],
    )  # fmt: skip
    assert bad.exit_code != 0 and "--num-requests" in bad.output
