"""Arrival schedules, statistically checked at fixed seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slotune.collector.bench.arrivals import (
    ArrivalKind,
    ArrivalSpec,
    arrival_from_flags,
    arrival_times,
    arrival_times_within,
)
from slotune.collector.errors import ConfigError
from slotune.collector.workload.traces import Trace, TraceRequest


def _ks_exponential(gaps: np.ndarray, rate: float) -> float:
    """Kolmogorov-Smirnov distance between the gaps and Exp(rate)."""
    x = np.sort(gaps)
    n = len(x)
    cdf = 1.0 - np.exp(-rate * x)
    return float(max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_poisson_gaps_are_exponential(seed: int) -> None:
    rate, n = 20.0, 5000
    times = arrival_times(ArrivalSpec.from_rate(rate), n, seed=seed)
    gaps = np.diff(times)
    assert times[0] == 0.0
    # 1 % critical value of the one-sample KS test: 1.63 / sqrt(n)
    assert _ks_exponential(gaps, rate) < 1.63 / math.sqrt(len(gaps))
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.06)


@pytest.mark.parametrize("burstiness", [0.25, 0.5, 4.0])
def test_gamma_keeps_the_mean_rate_and_sets_the_spread(burstiness: float) -> None:
    rate, n = 10.0, 20000
    spec = ArrivalSpec.from_rate(rate, burstiness)
    assert spec.kind is ArrivalKind.GAMMA
    gaps = np.diff(arrival_times(spec, n, seed=7))
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


def test_schedules_are_deterministic_for_a_seed() -> None:
    spec = ArrivalSpec.from_rate(5.0)
    assert np.array_equal(arrival_times(spec, 50, seed=3), arrival_times(spec, 50, seed=3))
    assert not np.array_equal(arrival_times(spec, 50, seed=3), arrival_times(spec, 50, seed=4))


def test_constant_and_infinite_rates() -> None:
    const = arrival_times(ArrivalSpec(ArrivalKind.CONSTANT, rate=4.0), 5)
    assert const.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert arrival_times(ArrivalSpec.from_rate(math.inf), 3).tolist() == [0.0, 0.0, 0.0]


def test_trace_timing_scales_the_trace_gaps() -> None:
    trace = Trace("t", tuple(TraceRequest(t, 10, 10) for t in (0.0, 1.0, 3.0)))
    spec = ArrivalSpec(ArrivalKind.TRACE, time_scale=0.5)
    assert arrival_times(spec, 3, trace=trace).tolist() == [0.0, 0.5, 1.5]
    with pytest.raises(ConfigError, match="lower --num-requests"):
        arrival_times(spec, 4, trace=trace)


def test_times_within_a_duration() -> None:
    times = arrival_times_within(ArrivalSpec.from_rate(50.0), 10.0, seed=1)
    assert times.max() < 10.0
    assert len(times) == pytest.approx(500, rel=0.15)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"rate": 1.0, "concurrency": 2},
        {"concurrency": 2, "trace_timing": True},
    ],
)
def test_exactly_one_arrival_process(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="exactly one arrival process"):
        arrival_from_flags(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"kind": ArrivalKind.POISSON, "rate": 0.0}, "--rate"),
        ({"kind": ArrivalKind.GAMMA, "rate": 1.0, "burstiness": 0.0}, "--burstiness"),
        ({"kind": ArrivalKind.CONCURRENCY, "concurrency": 0}, "--concurrency"),
        ({"kind": ArrivalKind.TRACE, "time_scale": -1.0}, "--time-scale"),
    ],
)
def test_bad_arrival_settings_name_the_flag(spec: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ArrivalSpec(**spec)  # type: ignore[arg-type]
