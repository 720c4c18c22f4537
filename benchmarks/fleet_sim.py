"""How fast the fleet simulator compares every routing policy on a whole real trace.

Replays the bundled ``azure-conv`` trace (19,366 requests) with its gaps scaled by 1/8 (eight
times the rate, so eight replicas are as busy as one replica is on the trace as recorded)
on eight ``llama-3.1-8b`` / ``h100-sxm`` replicas with vLLM's defaults — a short pool of six
and a long pool of two, so that length-pools applies too — under every policy
(``--policy all`` with a TTFT SLO, so slo-aware runs as well). Prints each policy's wall and
CPU time and the total. Target: all policies within 60 s on one core. Prints figures;
asserts nothing.

    .venv/bin/python benchmarks/fleet_sim.py [--workload azure-conv] [--time-scale 0.125]
        [--num-requests N]
"""

from __future__ import annotations

import argparse
import os
import time

from slotune.collector.slo import parse_slos
from slotune.tuner.fleet import policy_from_name
from slotune.tuner.fleet.pools import parse_pool
from slotune.tuner.fleet.simulator import policy_context, policy_names, simulate_fleet
from slotune.tuner.sim.simulator import load_workload

POOLS = ("short:6:llama-3.1-8b:h100-sxm", "long:2:llama-3.1-8b:h100-sxm")
SLOS = ("ttft:p99<=2s", "tpot:p99<=100ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="azure-conv")
    parser.add_argument("--time-scale", type=float, default=0.125)
    parser.add_argument("--num-requests", type=int, default=None)
    args = parser.parse_args()
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})  # one core, as the target says
    trace = load_workload(
        workload=args.workload, time_scale=args.time_scale, num_requests=args.num_requests
    )
    pools = [parse_pool(p) for p in POOLS]
    slos = parse_slos(list(SLOS))
    context = policy_context(pools, trace, slos)
    print(
        f"{args.workload}: {len(trace):,} requests over {trace.duration_s:,.0f} s "
        f"(gaps x{args.time_scale:g}), pools {', '.join(POOLS)}, one core"
    )
    print(f"{'policy':28} {'wall s':>8} {'cpu s':>8} {'goodput':>9} {'TTFT p99 ms':>12}")
    total_wall = total_cpu = 0.0
    for name in policy_names("all", context):
        policy = policy_from_name(name, context)
        t0, c0 = time.perf_counter(), time.process_time()
        result = simulate_fleet(pools, trace, policy, slos=slos)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        total_wall += wall
        total_cpu += cpu
        s = result.summary
        print(
            f"{policy.name:28} {wall:8.1f} {cpu:8.1f} {s.goodput:9.2f} "
            f"{s.ttft_ms.percentiles[99.0] or 0:12.0f}"
        )
    print(f"{'all policies':28} {total_wall:8.1f} {total_cpu:8.1f}   (target: 60 s on one core)")


if __name__ == "__main__":
    main()
