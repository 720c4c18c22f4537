"""Arrival processes: when each request is due, computed before the first one is sent.

A slow client then shows up as send lag (actual send minus scheduled time), never as a
silently lower offered rate.

- ``poisson``: exponential gaps with mean 1/rate.
- ``gamma``: gamma gaps with shape = burstiness and mean 1/rate (burstiness 1 is Poisson;
  below 1 burstier, above 1 smoother; the gaps' coefficient of variation is 1/sqrt(shape)),
  as ``vllm bench serve --burstiness``.
- ``constant``: exactly 1/rate apart.
- ``concurrency``: closed loop, C requests in flight; no schedule.
- ``trace``: the trace's own timestamps multiplied by ``time_scale``.

An infinite rate sends every request at time zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.collector.workload.traces import Trace


class ArrivalKind(StrEnum):
    POISSON = "poisson"
    GAMMA = "gamma"
    CONSTANT = "constant"
    CONCURRENCY = "concurrency"
    TRACE = "trace"


@dataclass(frozen=True, slots=True)
class ArrivalSpec:
    """An arrival process.

    Attributes:
        kind: the process.
        rate: requests per second (poisson, gamma, constant); ``math.inf`` for all at once.
        burstiness: gamma shape (gamma only).
        concurrency: requests kept in flight (concurrency only).
        time_scale: multiplies trace gaps (trace only; 2.0 = half the rate).
    """

    kind: ArrivalKind
    rate: float | None = None
    burstiness: float = 1.0
    concurrency: int | None = None
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.kind in (ArrivalKind.POISSON, ArrivalKind.GAMMA, ArrivalKind.CONSTANT) and (
            self.rate is None or not self.rate > 0
        ):
            raise ConfigError("--rate must be a number of requests per second above zero (or inf)")
        if self.kind is ArrivalKind.GAMMA and not self.burstiness > 0:
            raise ConfigError("--burstiness must be above zero (1 = Poisson, < 1 burstier)")
        if self.kind is ArrivalKind.CONCURRENCY and (self.concurrency or 0) < 1:
            raise ConfigError("--concurrency must be at least 1")
        if self.kind is ArrivalKind.TRACE and not self.time_scale > 0:
            raise ConfigError("--time-scale must be above zero (2.0 = half the trace's rate)")

    @classmethod
    def from_rate(cls, rate: float, burstiness: float = 1.0) -> ArrivalSpec:
        """Poisson for burstiness 1, gamma otherwise."""
        kind = ArrivalKind.POISSON if burstiness == 1.0 else ArrivalKind.GAMMA
        return cls(kind=kind, rate=rate, burstiness=burstiness)

    @property
    def is_open_loop(self) -> bool:
        return self.kind is not ArrivalKind.CONCURRENCY

    def describe(self) -> str:
        if self.kind is ArrivalKind.CONCURRENCY:
            return f"concurrency {self.concurrency}"
        if self.kind is ArrivalKind.TRACE:
            return f"trace timing x{self.time_scale:g}"
        extra = f", burstiness {self.burstiness:g}" if self.kind is ArrivalKind.GAMMA else ""
        return f"{self.kind.value} {self.rate:g} req/s{extra}"


def arrival_times(
    spec: ArrivalSpec, num_requests: int, *, seed: int = 0, trace: Trace | None = None
) -> np.ndarray:
    """Send offsets in seconds (first at 0) for ``num_requests`` open-loop requests.

    Raises:
        ConfigError: a closed-loop spec, or trace timing without a long enough trace.
    """
    if num_requests <= 0:
        return np.zeros(0)
    if spec.kind is ArrivalKind.CONCURRENCY:
        raise ConfigError("a concurrency run has no arrival schedule")
    if spec.kind is ArrivalKind.TRACE:
        if trace is None or len(trace) < num_requests:
            have = 0 if trace is None else len(trace)
            raise ConfigError(
                f"--trace-timing needs a trace with {num_requests} requests; "
                f"it has {have}: lower --num-requests or use --rate"
            )
        ts = np.array([r.timestamp_s for r in trace.requests[:num_requests]], dtype=float)
        offsets: np.ndarray = (ts - ts[0]) * spec.time_scale
        return offsets
    assert spec.rate is not None
    if math.isinf(spec.rate):
        return np.zeros(num_requests)
    if spec.kind is ArrivalKind.CONSTANT:
        return np.arange(num_requests, dtype=float) / spec.rate
    rng = np.random.default_rng(seed)
    if spec.kind is ArrivalKind.POISSON:
        gaps = rng.exponential(1.0 / spec.rate, size=num_requests)
    else:
        shape = spec.burstiness
        gaps = rng.gamma(shape, 1.0 / (spec.rate * shape), size=num_requests)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def arrival_times_within(
    spec: ArrivalSpec, duration_s: float, *, seed: int = 0, trace: Trace | None = None
) -> np.ndarray:
    """The open-loop send offsets that fall within ``[0, duration_s)``."""
    if spec.kind is ArrivalKind.TRACE:
        if trace is None:
            raise ConfigError("--trace-timing needs --workload or --trace")
        times = arrival_times(spec, len(trace), trace=trace)
        return times[times < duration_s]
    assert spec.rate is not None
    if math.isinf(spec.rate):
        raise ConfigError("--rate inf needs --num-requests, not --duration")
    n = max(16, math.ceil(spec.rate * duration_s * 1.5 + 10 * math.sqrt(spec.rate * duration_s)))
    while True:
        times = arrival_times(spec, n, seed=seed)
        if times[-1] >= duration_s:
            return times[times < duration_s]
        n *= 2


def arrival_from_flags(
    *,
    rate: float | None = None,
    burstiness: float = 1.0,
    concurrency: int | None = None,
    trace_timing: bool = False,
    time_scale: float = 1.0,
) -> ArrivalSpec:
    """The arrival process of ``--rate [--burstiness] | --concurrency | --trace-timing``.

    Raises:
        ConfigError: not exactly one of the three given.
    """
    given = [rate is not None, concurrency is not None, trace_timing]
    if sum(given) != 1:
        raise ConfigError(
            "give exactly one arrival process: --rate R [--burstiness B], "
            "--concurrency C, or --trace-timing [--time-scale K]"
        )
    if rate is not None:
        return ArrivalSpec.from_rate(rate, burstiness)
    if concurrency is not None:
        return ArrivalSpec(kind=ArrivalKind.CONCURRENCY, concurrency=concurrency)
    return ArrivalSpec(kind=ArrivalKind.TRACE, time_scale=time_scale)
