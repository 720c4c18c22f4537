"""Benchmark runs for charts: per-request latencies and rate -> latency/goodput curves.

``slotune bench --find-max-rate`` stores one run per measured rate, named ``NAME (max-rate)``
with the offered rate in its config; runs sharing a name form one curve.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from slotune.collector.store import BenchRunInfo, Store, load_bench_run
from slotune.collector.summary import Summary

MAX_RATE_SUFFIX = " (max-rate)"


@dataclass(frozen=True, slots=True)
class LatencySamples:
    """Every finished request's latencies of one run, in milliseconds (``itl`` per gap)."""

    run_id: int
    ttft_ms: tuple[float, ...]
    itl_ms: tuple[float, ...]
    tpot_ms: tuple[float, ...]
    e2e_ms: tuple[float, ...]


def latencies_of(store: Store, run_id: int) -> LatencySamples:
    """The per-request latencies of a stored run.

    Raises:
        ConfigError: no run has this id.
    """
    records = [r for r in load_bench_run(store, run_id).records if r.is_ok]

    def ms(values: Sequence[float | None]) -> tuple[float, ...]:
        return tuple(v * 1000.0 for v in values if v is not None)

    return LatencySamples(
        run_id=run_id,
        ttft_ms=ms([r.ttft_s for r in records]),
        itl_ms=ms([gap for r in records for gap, _ in r.itl_gaps_s()]),
        tpot_ms=ms([r.tpot_s for r in records]),
        e2e_ms=ms([r.e2e_s for r in records]),
    )


@dataclass(frozen=True, slots=True)
class RatePointView:
    """One measured rate of a max-rate search."""

    run_id: int
    rate: float
    goodput: float | None
    request_throughput: float | None
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    e2e_p99_ms: float | None
    slos_met: bool


@dataclass(frozen=True, slots=True)
class RateCurve:
    """The measurements of one max-rate search, by rate."""

    name: str
    points: tuple[RatePointView, ...]

    @property
    def max_rate(self) -> float | None:
        """The highest measured rate at which every SLO held."""
        return max((p.rate for p in self.points if p.slos_met), default=None)


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def max_rate_curves(runs: Sequence[BenchRunInfo]) -> list[RateCurve]:
    """The max-rate searches among stored runs (see the module docstring)."""
    groups: dict[str, list[RatePointView]] = defaultdict(list)
    for run in runs:
        if not run.meta.name.endswith(MAX_RATE_SUFFIX):
            continue
        arrival = run.meta.config.get("arrival") or {}
        rate = _num(arrival.get("rate")) if isinstance(arrival, dict) else None
        if rate is None:
            continue
        s = Summary.from_dict(run.summary)
        groups[run.meta.name[: -len(MAX_RATE_SUFFIX)]].append(
            RatePointView(
                run_id=run.run_id,
                rate=rate,
                goodput=s.goodput,
                request_throughput=s.request_throughput,
                ttft_p99_ms=s.ttft_ms.p99,
                itl_p99_ms=s.itl_ms.p99,
                e2e_p99_ms=s.e2e_ms.p99,
                slos_met=s.all_slos_met,
            )
        )
    return [
        RateCurve(name, tuple(sorted(points, key=lambda p: p.rate)))
        for name, points in sorted(groups.items())
    ]
