"""How fast the simulator replays a whole real trace on one CPU core.

Replays the bundled ``azure-conv`` trace (19,366 requests, ~58 minutes of Azure production
traffic) on ``llama-3.1-8b`` / ``h100-sxm`` with each engine's defaults (vLLM, then SGLang's
scheduler) through ``simulate()`` (simulation, per-token request records and summary), prints
its wall and CPU time and the CPU time of the summary built inside that same call, next to
Vidur's published speed (10,000 requests in 16.7 s on 2 vCPUs).
Target: the whole run within 1.5 s of CPU on one core (mooncake-conversation: 5 s). Prints
figures; asserts nothing.

    .venv/bin/python benchmarks/sim_speed.py [--workload azure-conv] [--model llama-3.1-8b]
        [--gpu h100-sxm] [--repeat 3] [--engine vllm --engine sglang]
"""

from __future__ import annotations

import argparse
import time
from typing import Any
from unittest import mock

from slotune.collector.summary import Summary, summarize
from slotune.collector.workload import named_workload
from slotune.tuner.engines.base import EngineConfig
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.sim import simulate, simulator

VIDUR_REQUESTS = 10_000
VIDUR_SECONDS = 16.7


def _once(config: EngineConfig, workload: str) -> dict[str, float]:
    trace = named_workload(workload)
    summary_cpu_s = [0.0]

    def timed_summarize(*args: Any, **kwargs: Any) -> Summary:
        # the summary simulate() itself builds, so its share is of this very run
        c = time.process_time()
        try:
            return summarize(*args, **kwargs)
        finally:
            summary_cpu_s[0] += time.process_time() - c

    with mock.patch.object(simulator, "summarize", timed_summarize):
        t0, c0 = time.perf_counter(), time.process_time()
        result = simulate(config, trace)
        t1, c1 = time.perf_counter(), time.process_time()
    return {
        "requests": len(trace),
        "steps": result.breakdown.num_steps,
        "tokens": result.summary.total_output_tokens,
        "wall_s": t1 - t0,
        "cpu_s": c1 - c0,
        "summary_cpu_s": summary_cpu_s[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="azure-conv")
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--gpu", default="h100-sxm")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--engine", action="append", help="engines to run, each with its defaults (vllm, sglang)"
    )
    args = parser.parse_args()
    for engine in args.engine or ["vllm", "sglang"]:
        config = adapter_for(engine).config_from_params(args.model, args.gpu, {})
        runs = [_once(config, args.workload) for _ in range(args.repeat)]
        _report(engine, args, min(runs, key=lambda r: r["cpu_s"]))


def _report(engine: str, args: argparse.Namespace, best: dict[str, float]) -> None:
    print(
        f"{args.workload} on {engine}: {best['requests']:,} requests, {best['tokens']:,} output "
        f"tokens, {best['steps']:,} engine steps on {args.model} / {args.gpu} (best of "
        f"{args.repeat})"
    )
    print(
        f"  simulate()        {best['wall_s']:6.2f} s wall  ({best['cpu_s']:.2f} s CPU; "
        "target <= 1.5 s azure-conv, 5 s mooncake-conversation)"
    )
    print(
        f"    of which the summary (per-token ITL pooling, same call) "
        f"{best['summary_cpu_s']:.2f} s CPU"
    )
    print(f"  simulated requests/s (total CPU): {best['requests'] / best['cpu_s']:,.0f}")
    print(
        f"  Vidur (published): {VIDUR_REQUESTS:,} requests in {VIDUR_SECONDS} s on 2 vCPUs = "
        f"{VIDUR_REQUESTS / VIDUR_SECONDS:,.0f} requests/s"
    )


if __name__ == "__main__":
    main()
