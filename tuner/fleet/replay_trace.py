"""Shape a trace for autoscaling replays: repeated days, a day curve, injected flash crowds."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.collector.workload import Trace, TraceRequest


@dataclass(frozen=True, slots=True)
class FlashCrowd:
    """``factor`` times the traffic from ``at_s`` for ``duration_s`` (trace seconds)."""

    at_s: float
    duration_s: float
    factor: float

    @classmethod
    def parse(cls, text: str) -> FlashCrowd:
        """``AT_S:DURATION_S:FACTOR``, e.g. ``1800:300:3``.

        Raises:
            ConfigError: not three numbers, or a factor <= 1 / a duration <= 0.
        """
        try:
            at_s, duration_s, factor = (float(x) for x in text.split(":"))
        except ValueError:
            raise ConfigError(
                f"--flash-crowd {text!r}: use AT_S:DURATION_S:FACTOR, e.g. 1800:300:3"
            ) from None
        if at_s < 0 or duration_s <= 0 or factor <= 1:
            raise ConfigError(
                f"--flash-crowd {text!r}: start >= 0, duration > 0 and factor > 1, e.g. 1800:300:3"
            )
        return cls(at_s, duration_s, factor)


def repeat_days(trace: Trace, days: int) -> Trace:
    """The trace ``days`` times back to back (one repetition = one day)."""
    if days < 1:
        raise ConfigError(f"--days {days}: use 1 or more")
    day_s = trace.duration_s + (trace.duration_s / max(len(trace) - 1, 1))
    requests = [
        replace(r, timestamp_s=r.timestamp_s + d * day_s, session_id=_day_session(r, d))
        for d in range(days)
        for r in trace.requests
    ]
    return replace(trace, requests=tuple(requests))


def _day_session(r: TraceRequest, day: int) -> str | None:
    return None if r.session_id is None else f"{r.session_id}@{day}"


def diurnal(trace: Trace, day_s: float, amplitude: float) -> Trace:
    """Warp arrival times so the rate follows ``1 - amplitude x cos(2 pi t / day_s)``.

    Every request is kept; the night (start of each day) gets ``1 - amplitude`` of the mean
    rate and midday ``1 + amplitude``.
    """
    if not 0 <= amplitude < 1:
        raise ConfigError(f"--diurnal {amplitude}: use an amplitude in [0, 1), e.g. 0.6")
    if amplitude == 0 or not len(trace):
        return trace
    end = trace.duration_s
    grid = np.linspace(0.0, end, 20_000)
    # cumulative intensity: the warped clock reaches trace time u at the t where it equals u
    cumulative = grid - amplitude * day_s / (2 * math.pi) * np.sin(2 * math.pi * grid / day_s)
    t = np.asarray([r.timestamp_s for r in trace.requests])
    warped = np.interp(t, cumulative, grid)
    return replace(
        trace,
        requests=tuple(
            replace(r, timestamp_s=float(w)) for r, w in zip(trace.requests, warped, strict=True)
        ),
    )


def inject_flash_crowd(trace: Trace, crowd: FlashCrowd, seed: int = 0) -> Trace:
    """Add ``factor - 1`` copies of the window's traffic, spread at random within it."""
    rng = np.random.default_rng(seed)
    end_s = crowd.at_s + crowd.duration_s
    window = [r for r in trace.requests if crowd.at_s <= r.timestamp_s < end_s]
    extra: list[TraceRequest] = []
    whole = int(crowd.factor - 1)
    for copy in range(math.ceil(crowd.factor - 1)):
        share = 1.0 if copy < whole else crowd.factor - 1 - whole
        for r in window:
            if copy >= whole and rng.random() >= share:
                continue
            extra.append(
                replace(
                    r,
                    timestamp_s=float(rng.uniform(crowd.at_s, end_s)),
                    session_id=None,
                )
            )
    merged = sorted((*trace.requests, *extra), key=lambda r: r.timestamp_s)
    return replace(trace, requests=tuple(merged))
