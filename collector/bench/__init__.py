"""The load generator: streaming requests to OpenAI-compatible servers, timed precisely.

Public surface (the tuner and the CLI use only these)::

    config = BenchConfig(url=..., arrival=ArrivalSpec.from_rate(4.0), input_len="512",
                         output_len="128", num_requests=200, slos=tuple(parse_slos([...])))
    result = run_benchmark(config)              # BenchResult(records, summary, ...)
    found = find_max_rate(lambda r: run_benchmark(config.with_rate(r)).summary, config.slos)
    run_id = save_run(store, result, name="baseline")
"""

from slotune.collector.bench.arrivals import ArrivalKind, ArrivalSpec
from slotune.collector.bench.client import Endpoint
from slotune.collector.bench.config import BenchConfig
from slotune.collector.bench.maxrate import MaxRateResult, RatePoint, find_max_rate
from slotune.collector.bench.persist import save_run
from slotune.collector.bench.result import BenchResult
from slotune.collector.bench.runner import arun_benchmark, run_benchmark

__all__ = [
    "ArrivalKind",
    "ArrivalSpec",
    "BenchConfig",
    "BenchResult",
    "Endpoint",
    "MaxRateResult",
    "RatePoint",
    "arun_benchmark",
    "find_max_rate",
    "run_benchmark",
    "save_run",
]
