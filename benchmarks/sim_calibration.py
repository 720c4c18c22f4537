"""How well ``slotune sim calibrate`` carries over to requests it did not fit.

For each model / GPU / tensor-parallel combination, "measured" requests come from the
simulator run with hidden, perturbed hardware factors (slower compute, memory and
interconnect than the datasheet, a heavier host step) plus 3 % per-request measurement
noise; the calibration fits the first third of them (by arrival) and the simulated mean
TTFT, TPOT and E2E of the remaining two thirds are compared with the measured ones, with
the bundled catalog (before) and with the fitted overlay (after). Target: after
calibration within 10 % (TTFT 20 %). Prints figures; asserts nothing.

    .venv/bin/python benchmarks/sim_calibration.py [--requests 900]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time

from slotune.collector.observed import ObservedRequest, observed_lines
from slotune.collector.workload import retime
from slotune.collector.workload.synthetic import Column, parse_length_spec, synthetic_trace
from slotune.tuner.sim import VllmConfig
from slotune.tuner.sim.calibration.measured import MeanErrors, calibrate
from slotune.tuner.sim.catalog import Efficiency
from slotune.tuner.sim.config import ResolvedConfig, resolve
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.simulator import replay

# (model, gpu, tensor-parallel size, request rate, hidden factors of the "real" GPU)
CASES = (
    ("llama-3.1-8b", "rtx-4090", 1, 2.0, Efficiency(0.6, 0.75, 1.0, 2.5e-3, 0.0)),
    ("qwen3-32b", "rtx-pro-6000", 2, 1.0, Efficiency(0.8, 0.85, 0.45, 2.0e-3, 40e-6)),
    ("llama-3.1-70b", "h100-sxm", 4, 2.0, Efficiency(1.1, 0.9, 0.7, 1.2e-3, 10e-6)),
)


def _measured(
    config: ResolvedConfig, hidden: Efficiency, rate: float, n: int, seed: int
) -> list[ObservedRequest]:
    trace = synthetic_trace(
        parse_length_spec("lognormal:6.5,0.8"),
        parse_length_spec("lognormal:5.0,0.7", column=Column.OUTPUT, field_name="--output-len"),
        n,
        seed=seed,
    )
    trace = retime(trace, rate=rate, seed=seed)
    real = dataclasses.replace(config, gpu=dataclasses.replace(config.gpu, efficiency=hidden))
    rng = random.Random(seed)
    out = []
    for i, d in enumerate(observed_lines(replay(EngineCore.create(real), trace).records)):
        ttft = d["ttft_ms"] * (1 + rng.gauss(0, 0.03))
        e2e = max(ttft, d["e2e_ms"] * (1 + rng.gauss(0, 0.03)))
        tpot = (e2e - ttft) / (d["output_tokens"] - 1) if d["output_tokens"] > 1 else None
        out.append(
            ObservedRequest(
                d["timestamp"], d["input_tokens"], d["output_tokens"], ttft, e2e, tpot, line=i + 1
            )
        )
    return out


def _fmt(e: MeanErrors | None) -> str:
    if e is None:
        return "-"
    return f"TTFT {e.ttft:+6.1%}  TPOT {e.tpot:+6.1%}  E2E {e.e2e:+6.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=900)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for model, gpu, tp, rate, hidden in CASES:
        config = resolve(
            VllmConfig(model=model, gpu=gpu, tensor_parallel_size=tp, max_model_len=8192)
        )
        observed = _measured(config, hidden, rate, args.requests, args.seed)
        c0 = time.process_time()
        report = calibrate(config, observed, fitted_on="perturbed simulation")
        cpu = time.process_time() - c0
        eff = report.efficiency
        print(f"{model} / {gpu} TP{tp} at {rate} req/s, {len(observed)} requests ({cpu:.0f} s CPU)")
        print(
            f"  hidden: compute x{hidden.compute}, memory x{hidden.memory}, step "
            f"{hidden.step_overhead_s}, interconnect x{hidden.interconnect}, all-reduce "
            f"+{hidden.all_reduce_latency_s}"
        )
        print(
            f"  fitted: compute x{eff.compute}, memory x{eff.memory}, step "
            f"{eff.step_overhead_s}, interconnect x{eff.interconnect}, all-reduce "
            f"+{eff.all_reduce_latency_s}"
        )
        print(f"  held back ({report.num_held_out}) before: {_fmt(report.held_out_before)}")
        print(f"  held back ({report.num_held_out}) after:  {_fmt(report.held_out_after)}")


if __name__ == "__main__":
    main()
