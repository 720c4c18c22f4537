"""Synthetic engine series with known answers, shared by the alert tests."""

from __future__ import annotations

from collections.abc import Iterable

from slotune.collector.store import SampleIn, Store, register_target, write_samples

T0 = 1_700_000_000.0
BOUNDS = ("0.1", "0.5", "1.0", "+Inf")


def histogram(
    target: str, family: str, points: Iterable[tuple[float, dict[str, float]]]
) -> list[SampleIn]:
    """Cumulative ``family_bucket`` samples: each point is (ts, {le: cumulative count})."""
    out = []
    for ts, per_le in points:
        for le, value in per_le.items():
            out.append(SampleIn(target, f"{family}_bucket", "histogram", {"le": le}, ts, value))
    return out


def steady(
    store: Store,
    target: str,
    *,
    start: float,
    end: float,
    step: float,
    good_per_step: float,
    bad_per_step: float,
    family: str = "ttft",
    base: tuple[float, float] = (0.0, 0.0),
    pool: str | None = None,
) -> tuple[float, float]:
    """Write a histogram growing by ``good`` requests under 0.5 s and ``bad`` above 1 s per
    step; returns the cumulative (good, bad) at the end."""
    register_target(store, target, "vllm", "", {"pool": pool} if pool else {})
    good, bad = base
    points = []
    ts = start
    while ts <= end + 1e-9:
        points.append((ts, {"0.1": 0.0, "0.5": good, "1.0": good, "+Inf": good + bad}))
        good += good_per_step
        bad += bad_per_step
        ts += step
    write_samples(store, histogram(target, family, points))
    return good - good_per_step, bad - bad_per_step
