"""The highest request rate at which every SLO holds.

Any ``measure(rate) -> Summary`` works: a real benchmark against a server, or the simulator.
The search assumes that SLOs that fail at some rate also fail above it (latency grows with
load), probes exponentially from ``start_rate`` to bracket the threshold, then bisects until
the bracket is narrower than ``rel_tolerance`` of its upper end. Every step is one full
measurement, and every measurement goes into the curve.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slotune.collector.errors import ConfigError
from slotune.collector.slo import SLO
from slotune.collector.summary import Summary


@dataclass(frozen=True, slots=True)
class RatePoint:
    """One measurement of the search.

    Attributes:
        rate: offered request rate (req/s).
        summary: the run's summary.
        attainment: good fraction per SLO name.
        all_met: whether every SLO held.
    """

    rate: float
    summary: Summary
    attainment: dict[str, float]
    all_met: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "all_met": self.all_met,
            "attainment": self.attainment,
            "summary": self.summary.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class MaxRateResult:
    """The search outcome.

    Attributes:
        max_rate: highest measured rate at which every SLO held; 0.0 if none did.
        curve: every measurement, sorted by rate.
        bracket: (highest passing, lowest failing) rate; the failing end is None if no
            measured rate failed within ``max_steps``.
        converged: the bracket is within the tolerance.
    """

    max_rate: float
    curve: list[RatePoint] = field(default_factory=list)
    bracket: tuple[float, float | None] = (0.0, None)
    converged: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_rate": self.max_rate,
            "bracket": list(self.bracket),
            "converged": self.converged,
            "curve": [p.to_dict() for p in self.curve],
        }


def _point(rate: float, summary: Summary, slos: Sequence[SLO]) -> RatePoint:
    by_name = {a.slo.name: a for a in summary.slo_attainment}
    missing = [s.name for s in slos if s.name not in by_name]
    if missing:
        raise ConfigError(
            f"the measure function's summary lacks SLO(s) {', '.join(missing)}; "
            "summarize each run with the same SLOs given to find_max_rate"
        )
    atts = [by_name[s.name] for s in slos]
    return RatePoint(
        rate=rate,
        summary=summary,
        attainment={a.slo.name: a.attainment for a in atts},
        all_met=all(a.is_met for a in atts),
    )


def find_max_rate(
    measure: Callable[[float], Summary],
    slos: Sequence[SLO],
    *,
    start_rate: float = 1.0,
    rel_tolerance: float = 0.05,
    max_steps: int = 16,
    on_point: Callable[[RatePoint], None] | None = None,
) -> MaxRateResult:
    """Search the highest rate at which every SLO holds.

    Args:
        measure: runs one full measurement at a rate and returns its summary, computed with
            ``slos``.
        slos: the SLOs that must all hold.
        start_rate: first rate to try (req/s).
        rel_tolerance: stop when (fail - pass) / fail is at most this.
        max_steps: most measurements in all.
        on_point: called after each measurement (for progress display).

    Returns:
        The best passing rate and the curve of every measurement.

    Raises:
        ConfigError: no SLO given, or bad search parameters.
    """
    if not slos:
        raise ConfigError("the max-rate search needs at least one --slo, e.g. ttft:p99<=500ms")
    if not start_rate > 0:
        raise ConfigError("the max-rate search's start rate must be above zero")
    if not 0 < rel_tolerance < 1:
        raise ConfigError("--max-rate-tolerance must be between 0 and 1, e.g. 0.05")
    if max_steps < 2:
        raise ConfigError("the max-rate search needs at least 2 steps")
    curve: list[RatePoint] = []

    def probe(rate: float) -> bool:
        point = _point(rate, measure(rate), slos)
        curve.append(point)
        if on_point is not None:
            on_point(point)
        return point.all_met

    good, bad = _bracket(probe, start_rate, max_steps)
    while (
        bad is not None
        and good > 0
        and (bad - good) / bad > rel_tolerance
        and len(curve) < max_steps
    ):
        mid = (good + bad) / 2
        if probe(mid):
            good = mid
        else:
            bad = mid
    converged = bad is not None and good > 0 and (bad - good) / bad <= rel_tolerance
    curve.sort(key=lambda p: p.rate)
    return MaxRateResult(max_rate=good, curve=curve, bracket=(good, bad), converged=converged)


def _bracket(
    probe: Callable[[float], bool], start_rate: float, max_steps: int
) -> tuple[float, float | None]:
    """(passing, failing) rates around the threshold by doubling or halving."""
    rate = start_rate
    if probe(rate):
        good = rate
        for _ in range(max_steps - 1):
            rate *= 2
            if not probe(rate):
                return good, rate
            good = rate
        return good, None
    bad = rate
    for _ in range(max_steps - 1):
        rate /= 2
        if probe(rate):
            return rate, bad
        bad = rate
    return 0.0, bad
