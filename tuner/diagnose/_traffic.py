"""What a trace's traffic looks like: length distributions, their correlation, burstiness.

Burstiness is read two ways: the coefficient of variation of inter-arrival gaps (1 for a
Poisson process, above 1 bursty) and the peak-to-mean ratio of arrivals per window (1 min and
1 h; a window is reported only when the trace holds at least two of them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slotune.collector.workload import TraceRequest

F64 = np.ndarray[Any, np.dtype[np.float64]]


@dataclass(frozen=True, slots=True)
class Lengths:
    """A length distribution, in tokens."""

    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: F64) -> Lengths:
        p50, p90, p99 = np.percentile(values, (50, 90, 99))
        return cls(float(values.mean()), float(p50), float(p90), float(p99), float(values.max()))

    def to_dict(self) -> dict[str, float]:
        return {
            "mean": self.mean,
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "max": self.max,
        }


@dataclass(frozen=True, slots=True)
class Traffic:
    """Lengths and arrivals of a trace.

    Attributes:
        length_correlation: Spearman rank correlation of input and output lengths.
        interarrival_cv: coefficient of variation of the gaps between arrivals.
        peak_to_mean_1m / peak_to_mean_1h: busiest window's arrivals over the mean window's;
            None when the trace is shorter than two windows.
        long_prefill_token_share: prompt tokens in requests above the input p90.
    """

    num_requests: int
    duration_s: float
    mean_rate: float
    input_tokens: Lengths
    output_tokens: Lengths
    length_correlation: float | None
    interarrival_cv: float | None
    peak_to_mean_1m: float | None
    peak_to_mean_1h: float | None
    long_prefill_token_share: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_requests": self.num_requests,
            "duration_s": self.duration_s,
            "mean_rate": self.mean_rate,
            "input_tokens": self.input_tokens.to_dict(),
            "output_tokens": self.output_tokens.to_dict(),
            "length_correlation": self.length_correlation,
            "interarrival_cv": self.interarrival_cv,
            "peak_to_mean_1m": self.peak_to_mean_1m,
            "peak_to_mean_1h": self.peak_to_mean_1h,
            "long_prefill_token_share": self.long_prefill_token_share,
        }


def traffic(requests: Sequence[TraceRequest]) -> Traffic:
    """The traffic figures of requests in arrival order (at least one)."""
    t = np.array([r.timestamp_s for r in requests], dtype=np.float64)
    inputs = np.array([r.input_tokens for r in requests], dtype=np.float64)
    outputs = np.array([r.output_tokens for r in requests], dtype=np.float64)
    duration = float(t[-1] - t[0])
    gaps = np.diff(t)
    p90 = np.percentile(inputs, 90)
    return Traffic(
        num_requests=len(requests),
        duration_s=duration,
        mean_rate=(len(requests) - 1) / duration if duration > 0 else 0.0,
        input_tokens=Lengths.of(inputs),
        output_tokens=Lengths.of(outputs),
        length_correlation=_spearman(inputs, outputs),
        interarrival_cv=float(gaps.std() / gaps.mean())
        if gaps.size > 1 and gaps.mean() > 0
        else None,
        peak_to_mean_1m=_peak_to_mean(t, 60.0),
        peak_to_mean_1h=_peak_to_mean(t, 3600.0),
        long_prefill_token_share=float(inputs[inputs > p90].sum() / inputs.sum())
        if inputs.sum()
        else 0.0,
    )


def _spearman(a: F64, b: F64) -> float | None:
    if a.size < 3 or a.std() == 0 or b.std() == 0:
        return None
    ra = np.argsort(np.argsort(a)).astype(np.float64)
    rb = np.argsort(np.argsort(b)).astype(np.float64)
    return float(np.corrcoef(ra, rb)[0, 1])


def _peak_to_mean(t: F64, window_s: float) -> float | None:
    span = t[-1] - t[0]
    num_windows = int(span // window_s)
    if num_windows < 2:
        return None
    # Whole windows only: a last partial window would read as a lull.
    counts = np.bincount(((t - t[0]) // window_s).astype(np.int64), minlength=num_windows)[
        :num_windows
    ]
    return float(counts.max() / counts.mean())
