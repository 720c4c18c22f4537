"""Prefix-cache hit rate on mooncake-conversation: the trace's ceiling vs the simulated engine.

The ceiling is what an unbounded prefix cache could hit: the share of the trace's 512-token
``hash_ids`` blocks that continue a prefix seen in an earlier request. The simulated engine
(``llama-3.1-8b`` / ``h100-sxm``, vLLM defaults, 16-token blocks, LRU free queue) is then run
with its KV cache as the memory model sizes it and 4, 16 and 1000 times larger: if the hit
rate reaches the ceiling once nothing is evicted, the gap at the real size is capacity and
eviction, not the hashing. Prints figures; asserts nothing. Several minutes of CPU.

    .venv/bin/python benchmarks/sim_prefix_cache.py [--scales 1,4,16,1000]
"""

from __future__ import annotations

import argparse
import dataclasses

from slotune.collector.workload import named_workload
from slotune.tuner.sim import VllmConfig
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.simulator import replay_timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default="1,4,16,1000")
    args = parser.parse_args()
    trace = named_workload("mooncake-conversation")
    seen: set[int] = set()
    repeated = total = 0
    for request in trace.requests:
        in_prefix = True
        for h in request.hash_ids:
            total += 1
            in_prefix = in_prefix and h in seen
            repeated += in_prefix
            seen.add(h)
    print(
        f"mooncake-conversation: {len(trace):,} requests, {total:,} blocks of 512 tokens; "
        f"{repeated / total:.1%} continue a prefix seen before (an unbounded cache's ceiling)"
    )
    base = EngineCore.create(VllmConfig(model="llama-3.1-8b", gpu="h100-sxm"))
    for scale in (int(x) for x in args.scales.split(",")):
        capacity = dataclasses.replace(base.capacity, num_blocks=base.capacity.num_blocks * scale)
        core = EngineCore(base.config, capacity, base.cost)
        replay_timings(core, trace)
        s = core.stats
        print(
            f"  KV x{scale:<5} {s.kv_tokens:>12,} tokens: hit rate {s.prefix_hits / s.prefix_queries:6.1%} "
            f"(vLLM's hits / queries, re-admissions after preemption included), "
            f"first-time queries {sum(r.input_tokens for r in trace.requests):,}, "
            f"queries {s.prefix_queries:,}, preemptions {s.preemptions:,}"
        )


if __name__ == "__main__":
    main()
