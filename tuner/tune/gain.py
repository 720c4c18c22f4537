"""When a study may call a difference between two configurations a gain.

Two rules, for every backend:

1. **The measurement must have reached the configuration's limit.** A trial's figure is the
   configuration's only when its runs broke an SLO (capacity: at a rate above the one
   reported) or the engine stopped keeping up (:mod:`tuner.tune.steady`). Below that, every
   configuration serves the offered load and their goodput or throughput differ only by
   sample noise: the trial is limited by the *offered load* and cannot tell configurations
   apart. No gain is claimed over a default limited by the offered load.
2. **The difference must stand out of the spread between repeats.** When the best and the
   default were measured more than once (the re-check's other seeds), the best's worst run
   must beat the default's best run, i.e. their ranges (the spread, largest minus smallest
   value) must not overlap; the study repeats both up to :data:`MAX_EXTRA_ROUNDS` more times
   while they do, then reports the difference as noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from slotune.tuner.tune.objectives import SATURATION_RATE, Measurement, ObjectiveKind
from slotune.tuner.tune.steady import MAX_QUEUE_GROWTH

MAX_EXTRA_ROUNDS = 2
# Goodput this far below the served request rate means requests missed their SLO thresholds.
MISSED_SHARE = 0.02


class Limit(StrEnum):
    """What bounded a trial's figure."""

    SLO = "slo"  # an SLO broke (capacity: at a higher rate tried), or requests missed one
    SATURATION = "saturation"  # the engine did not keep up with the offered load
    OFFERED_LOAD = "offered_load"  # neither: the figure is the offered load's
    NOT_RUN = "not_run"  # the engine did not start or died


LIMIT_NOTES = {
    Limit.SLO: "an SLO bounded the figure",
    Limit.SATURATION: "the engine saturated",
    Limit.OFFERED_LOAD: (
        "could not tell configurations apart: no SLO broke and the engine kept up with the "
        "offered load"
    ),
    Limit.NOT_RUN: "not measured",
}


def trial_limit(kind: ObjectiveKind, measurement: Measurement) -> Limit:
    """What bounded a trial, from its measurement."""
    summary = measurement.summary
    if measurement.failure or summary is None:
        return Limit.NOT_RUN
    unsteady = measurement.unsteady_rates
    if kind is ObjectiveKind.CAPACITY:
        if any(not point.slos_met for point in measurement.curve):
            return Limit.SLO
        return Limit.SATURATION if unsteady else Limit.OFFERED_LOAD
    if not summary.all_slos_met:
        return Limit.SLO
    growth = summary.queue_growth or 0.0
    if measurement.rate == SATURATION_RATE or unsteady or growth > MAX_QUEUE_GROWTH:
        return Limit.SATURATION
    goodput, served = summary.goodput, summary.request_throughput
    if kind is ObjectiveKind.GOODPUT and served > 0 and goodput < served * (1 - MISSED_SHARE):
        return Limit.SLO
    return Limit.OFFERED_LOAD


@dataclass(frozen=True, slots=True)
class GainVerdict:
    """Whether the best beats the default, and by how much.

    Attributes:
        gain: best / default value, None when not claimed.
        note: why not claimed (or a caveat), None otherwise.
        difference: best - default value.
        spread: the larger of the two configurations' repeat spreads (None: not repeated).
        default_limit: what bounded the default's figure.
    """

    gain: float | None
    note: str | None
    difference: float | None = None
    spread: float | None = None
    default_limit: str | None = None


def spread(values: Sequence[float]) -> float | None:
    """Largest minus smallest of repeated values (None for fewer than two)."""
    return max(values) - min(values) if len(values) >= 2 else None


def are_apart(best_repeats: Sequence[float], default_repeats: Sequence[float]) -> bool:
    """Whether every run of the best beat every run of the default."""
    return bool(best_repeats) and bool(default_repeats) and min(best_repeats) > max(default_repeats)


def judge_gain(
    best_value: float,
    default_value: float,
    default_limit: Limit,
    best_repeats: Sequence[float],
    default_repeats: Sequence[float],
) -> GainVerdict:
    """Apply the two rules (module docstring) to a feasible best and a feasible default."""
    difference = best_value - default_value
    if default_limit is Limit.OFFERED_LOAD:
        return GainVerdict(
            None,
            "could not tell the configurations apart: the default met every SLO without "
            "saturating at the offered load, so any difference is noise (raise --rate, or "
            "use --objective capacity)",
            difference,
            None,
            default_limit.value,
        )
    spreads = [s for s in (spread(best_repeats), spread(default_repeats)) if s is not None]
    widest = max(spreads) if spreads else None
    best_runs = list(best_repeats) or [best_value]
    default_runs = list(default_repeats) or [default_value]
    if not are_apart(best_runs, default_runs):
        return GainVerdict(
            None,
            f"within noise: the best's worst run ({min(best_runs):.3g}) does not beat the "
            f"default's best run ({max(default_runs):.3g}); spread between repeats: best "
            f"{spread(best_runs) or 0:.3g}, default {spread(default_runs) or 0:.3g}",
            difference,
            widest,
            default_limit.value,
        )
    note = None if widest is not None else "not repeated (re-check off): spread unknown"
    gain = best_value / default_value if default_value else None
    return GainVerdict(gain, note, difference, widest, default_limit.value)
