"""The load generator: streaming requests to OpenAI-compatible servers, timed precisely.

Public surface (the tuner and the CLI use only these)::

    config = BenchConfig(url=..., arrival=ArrivalSpec.from_rate(4.0), input_len="512",
                         output_len="128", num_requests=200, slos=tuple(parse_slos([...])))
    result = run_benchmark(config)              # BenchResult(records, summary, ...)
    found = find_max_rate(lambda r: run_benchmark(config.with_rate(r)).summary, config.slos)
    run_id = save_run(store_or_url, result, name="baseline")
    failure = run_failure(result.summary, fail_on_slo=True)   # (exit status, why) or None

The rest (tables, comparison, stored runs) serves ``slotune bench`` and its subcommands.
"""

from slotune.collector.bench.arrivals import ArrivalKind, ArrivalSpec, arrival_from_flags
from slotune.collector.bench.client import Endpoint, ErrorKind
from slotune.collector.bench.compare import compare_summaries
from slotune.collector.bench.config import BenchConfig
from slotune.collector.bench.maxrate import MaxRateResult, RatePoint, find_max_rate
from slotune.collector.bench.persist import (
    RunRef,
    check_store,
    list_runs,
    resolve_run,
    run_name,
    save_run,
)
from slotune.collector.bench.render import (
    compare_table,
    max_rate_table,
    runs_table,
    summary_table,
)
from slotune.collector.bench.result import BenchResult, run_failure
from slotune.collector.bench.runner import arun_benchmark, run_benchmark
from slotune.collector.bench.search import search_max_rate
from slotune.collector.bench.session import Outputs, measure, measure_max_rate

__all__ = [
    "ArrivalKind",
    "ArrivalSpec",
    "BenchConfig",
    "BenchResult",
    "Endpoint",
    "ErrorKind",
    "MaxRateResult",
    "Outputs",
    "RatePoint",
    "RunRef",
    "arrival_from_flags",
    "arun_benchmark",
    "check_store",
    "compare_summaries",
    "compare_table",
    "find_max_rate",
    "list_runs",
    "max_rate_table",
    "measure",
    "measure_max_rate",
    "resolve_run",
    "run_benchmark",
    "run_failure",
    "run_name",
    "runs_table",
    "save_run",
    "search_max_rate",
    "summary_table",
]
