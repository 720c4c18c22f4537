"""The max-rate search run against a real server: every step is a full benchmark."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slotune.collector.bench.config import BenchConfig
from slotune.collector.bench.maxrate import MaxRateResult, RatePoint, find_max_rate
from slotune.collector.bench.result import BenchResult
from slotune.collector.bench.runner import run_benchmark
from slotune.collector.errors import ConfigError
from slotune.collector.summary import Summary


@dataclass(frozen=True, slots=True)
class MaxRateRun:
    """The search result and the benchmark run behind each of its points."""

    result: MaxRateResult
    runs: tuple[BenchResult, ...]


def search_max_rate(
    config: BenchConfig,
    *,
    rel_tolerance: float = 0.05,
    max_steps: int = 12,
    progress: bool = False,
    on_point: Callable[[RatePoint], None] | None = None,
) -> MaxRateRun:
    """Find the highest open-loop rate at which all of ``config.slos`` hold.

    The search starts at ``config.arrival.rate`` and keeps its burstiness.

    Raises:
        ConfigError: no SLOs, or a closed-loop / trace-timed arrival process.
    """
    if not config.arrival.is_open_loop or config.arrival.rate is None:
        raise ConfigError(
            "--find-max-rate varies --rate; drop --concurrency/--trace-timing "
            "and give --rate R as the starting rate"
        )
    runs: list[BenchResult] = []

    def measure(rate: float) -> Summary:
        result = run_benchmark(config.with_rate(rate), progress=progress)
        runs.append(result)
        return result.summary

    found = find_max_rate(
        measure,
        config.slos,
        start_rate=config.arrival.rate,
        rel_tolerance=rel_tolerance,
        max_steps=max_steps,
        on_point=on_point,
    )
    runs.sort(key=lambda r: r.config.arrival.rate or 0.0)
    return MaxRateRun(result=found, runs=tuple(runs))
