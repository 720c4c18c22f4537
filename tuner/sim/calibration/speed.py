"""Measures the cost model's hot path: microseconds per ``CostModel.step_time_s`` call.

Usage::

    python -m tuner.sim.calibration.speed [--model llama-3.1-8b] [--gpu h100-sxm] [--calls N]

Calls it with a realistic mix of step shapes (decode batches of 1-256 sequences, prefill
chunks up to 8,192 tokens), after one warm-up pass that fills the per-token-count caches as a
simulation would.
"""

from __future__ import annotations

import argparse
import random
import time

from slotune.tuner.sim.catalog import get_gpu, get_model
from slotune.tuner.sim.cost import CostModel


def measure_us_per_call(model_id: str, gpu_id: str, calls: int, seed: int = 0) -> float:
    """Mean wall time of one ``step_time_s`` call, in microseconds."""
    cost = CostModel(get_model(model_id), get_gpu(gpu_id))
    rng = random.Random(seed)
    shapes = []
    for _ in range(4096):
        decode = rng.randint(0, 256)
        prefill = rng.choice((0, 0, 0, rng.randint(1, 8192)))
        shapes.append(
            (
                prefill,
                prefill * (rng.randint(0, 4096) + prefill / 2),
                decode,
                decode * rng.randint(100, 4000),
                1 if prefill else 0,
            )
        )
    for shape in shapes:
        cost.step_time_s(*shape)
    step = cost.step_time_s
    n = len(shapes)
    start = time.perf_counter()
    for i in range(calls):
        step(*shapes[i % n])
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tuner.sim.calibration.speed")
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--gpu", default="h100-sxm")
    parser.add_argument("--calls", type=int, default=1_000_000)
    args = parser.parse_args()
    us = measure_us_per_call(args.model, args.gpu, args.calls)
    print(
        f"CostModel.step_time_s: {us:.2f} us/call ({args.model} on {args.gpu}, "
        f"{args.calls:,} calls, one core)"
    )


if __name__ == "__main__":
    main()
