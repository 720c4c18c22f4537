"""The run plan: which requests may be sent, in which phase, and when (open loop).

Requests ``[0, warmup)`` warm the server up, the next ``num_measured`` are the results, and
the rest (cool-down) keep the load on only while measured requests are still in flight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from slotune.collector.bench.arrivals import ArrivalKind, arrival_times, arrival_times_within
from slotune.collector.bench.config import DEFAULT_NUM_REQUESTS, BenchConfig
from slotune.collector.errors import ConfigError
from slotune.collector.workload.synthetic import Column, parse_length_spec, synthetic_trace
from slotune.collector.workload.traces import Trace, resolve_workload

# A closed-loop run by duration cannot know its request count; this bounds the supply.
CLOSED_LOOP_REQUESTS_PER_STREAM_S = 20
MAX_CLOSED_LOOP_SUPPLY = 200_000


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything decided before the first request is sent.

    Attributes:
        trace: every request that may be sent (warm-up, measured, cool-down supply).
        times_s: open-loop send offsets, one per trace request; None for a closed loop.
        num_warmup: leading requests left out.
        num_measured: measured requests; None for a closed loop by duration.
    """

    trace: Trace
    times_s: np.ndarray | None
    num_warmup: int
    num_measured: int | None

    @property
    def offered_rate(self) -> float | None:
        """Scheduled rate of the measured requests ((n - 1) / their schedule span)."""
        if self.times_s is None or not self.num_measured or self.num_measured < 2:
            return None
        w, m = self.num_warmup, self.num_measured
        span = float(self.times_s[w + m - 1] - self.times_s[w])
        return (m - 1) / span if span > 0 else math.inf


def make_plan(config: BenchConfig) -> Plan:
    """Lay out the run described by ``config``.

    Raises:
        ConfigError: the workload is too short for the asked size, or bad specs.
    """
    spec, w = config.arrival, config.warmup
    source = _source_trace(config)
    m: int | None
    if spec.is_open_loop:
        m = _open_loop_measured(config, source)
        supply = w + m + (m if config.cooldown else 0)
    else:
        m = config.num_requests
        if m is None and config.duration_s is None:
            m = DEFAULT_NUM_REQUESTS
        per_phase = m if m is not None else _closed_loop_supply(config)
        supply = w + per_phase + (per_phase if config.cooldown else 0)
    trace = _take(config, source, supply, w + (m or 1))
    times = (
        arrival_times(spec, len(trace), seed=config.seed, trace=trace)
        if spec.is_open_loop
        else None
    )
    return Plan(trace=trace, times_s=times, num_warmup=w, num_measured=m)


def _closed_loop_supply(config: BenchConfig) -> int:
    per_s = (config.arrival.concurrency or 1) * CLOSED_LOOP_REQUESTS_PER_STREAM_S
    return min(MAX_CLOSED_LOOP_SUPPLY, max(1000, math.ceil(per_s * (config.duration_s or 0))))


def _source_trace(config: BenchConfig) -> Trace | None:
    if config.input_len is None:
        return resolve_workload(config.workload, config.trace_file)
    return None


def _open_loop_measured(config: BenchConfig, source: Trace | None) -> int:
    spec, w = config.arrival, config.warmup
    if config.duration_s is None:
        if config.num_requests is not None:
            return config.num_requests
        if spec.kind is ArrivalKind.TRACE and source is not None:
            if len(source) <= w:
                raise ConfigError(
                    f"--warmup {w} leaves no request of the {len(source)}-request "
                    "trace to measure; lower --warmup"
                )
            return len(source) - w
        return DEFAULT_NUM_REQUESTS
    if spec.kind is ArrivalKind.TRACE:
        times = arrival_times(spec, len(source or ()), trace=source)
        if len(times) <= w:
            raise ConfigError(f"--warmup {w} leaves no trace request to measure")
        start = times[w]
        return max(1, int(np.count_nonzero((times >= start) & (times < start + config.duration_s))))
    return max(1, len(arrival_times_within(spec, config.duration_s, seed=config.seed)))


def _take(config: BenchConfig, source: Trace | None, supply: int, needed: int) -> Trace:
    if source is None:
        assert config.input_len is not None and config.output_len is not None
        input_len = parse_length_spec(
            config.input_len, column=Column.INPUT, field_name="--input-len"
        )
        output_len = parse_length_spec(
            config.output_len, column=Column.OUTPUT, field_name="--output-len"
        )
        return synthetic_trace(
            input_len,
            output_len,
            supply,
            seed=config.seed,
            shared_prefix_tokens=config.shared_prefix_tokens,
            turns=config.turns,
        )
    if len(source) < needed:
        raise ConfigError(
            f"workload {source.name!r} has {len(source)} requests, fewer than the "
            f"{needed} asked (warm-up + measured); lower --num-requests/--warmup"
        )
    return Trace(name=source.name, requests=source.requests[:supply], source=source.source)
