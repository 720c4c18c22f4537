"""What a trial maximises, and how SLOs become Optuna constraints.

Objectives (all measured on one opened engine, see :mod:`tuner.tune.backends.base`):

- ``capacity`` (default): the highest request rate (req/s) at which every SLO holds, found
  by the max-rate search of ``slotune bench`` (``collector.bench.find_max_rate``). It is what
  sets the number of GPUs to buy.
- ``goodput``: requests/s completed meeting every per-request SLO, at the workload's offered
  load (``--rate``, or the trace's own timestamps).
- ``throughput``: output tokens/s at the offered load (saturation when no ``--rate``).
- ``pareto``: two objectives at the offered load, output tokens/s (maximise) and p99 TTFT in
  ms (minimise); the study reports the Pareto front.

Constraints: one per SLO, named after it, ``objective - attainment`` (<= 0 holds, so a
trial is feasible exactly when ``Summary.all_slos_met``), plus, when broken, the relative
excess of the observed percentile over the threshold; and ``launch`` (1 when the engine did
not start or the run failed, else 0). Every trial carries the same keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from slotune.collector.slo import SLI, SLO, Attainment
from slotune.collector.summary import Summary
from slotune.collector.vocabulary import ObjectiveKind as ObjectiveKind

LAUNCH_CONSTRAINT = "launch"
# The max-rate search stops when two rates bracket the limit this closely.
CAPACITY_REL_TOLERANCE = 0.02
CAPACITY_MAX_STEPS = 10
# The search halves the rate while SLOs fail; below start_rate * this it gives up, since
# every halving doubles a real run's duration and a configuration this far off is not a
# candidate anyway.
CAPACITY_FLOOR_FRACTION = 1 / 8
SATURATION_RATE = 1e6


class CurvePoint(NamedTuple):
    """One run of a trial: its offered rate (None: the trace's own timestamps), goodput and
    whether every SLO held. Stored as the list ``[rate, goodput, slos_met]``."""

    rate: float | None
    goodput: float
    slos_met: bool


@dataclass(frozen=True, slots=True)
class Measurement:
    """The outcome of one trial.

    Attributes:
        values: objective values, in the order of ``ObjectiveKind.value_names``.
        constraints: constraint name -> value (<= 0 holds).
        rate: offered rate of the reported point (capacity: the max rate; None = trace times).
        summary: the run summary at that point (None when nothing ran).
        curve: every run the trial made.
        failure: why the configuration could not be measured (launch error, crash), if so.
        engine: server-side figures scraped from the engine, when the backend has them, as
            the backend reported them (their keys differ per backend).
        unsteady_rates: rates whose run did not reach steady state even on the longest
            trace tried (:mod:`tuner.tune.steady`); the figures there understate the queue.
    """

    values: tuple[float, ...]
    constraints: dict[str, float]
    rate: float | None = None
    summary: Summary | None = None
    curve: tuple[CurvePoint, ...] = ()
    failure: str | None = None
    engine: Mapping[str, Any] = field(default_factory=dict)
    unsteady_rates: tuple[float, ...] = ()

    @property
    def is_feasible(self) -> bool:
        return all(v <= 0 for v in self.constraints.values())

    def to_attrs(self) -> dict[str, Any]:
        """JSON-able form kept in the trial's user attributes."""
        return {
            "rate": self.rate,
            "summary": None if self.summary is None else self.summary.to_dict(),
            "curve": [list(p) for p in self.curve],
            "failure": self.failure,
            "engine": dict(self.engine),
            "unsteady_rates": list(self.unsteady_rates),
        }

    @classmethod
    def from_attrs(
        cls,
        attrs: Mapping[str, Any],
        values: Sequence[float] = (),
        constraints: Mapping[str, float] | None = None,
    ) -> Measurement:
        """The measurement kept in a trial's user attributes (``to_attrs``), with the values
        and constraints Optuna keeps beside them; missing attributes read as nothing measured.
        """
        summary = attrs.get("summary")
        rate = attrs.get("rate")
        return cls(
            values=tuple(values),
            constraints=dict(constraints or {}),
            rate=None if rate is None else float(rate),
            summary=Summary.from_dict(summary) if summary else None,
            curve=tuple(
                CurvePoint(None if r is None else float(r), float(g), bool(met))
                for r, g, met in attrs.get("curve") or ()
            ),
            failure=attrs.get("failure"),
            engine=dict(attrs.get("engine") or {}),
            unsteady_rates=tuple(float(r) for r in attrs.get("unsteady_rates") or ()),
        )


def slo_constraints(summary: Summary, slos: Sequence[SLO]) -> dict[str, float]:
    """Constraint values of a run: ``objective - attainment`` per SLO (<= 0 holds)."""
    by_name = {a.slo.name: a for a in summary.slo_attainment}
    out: dict[str, float] = {}
    for slo in slos:
        att = by_name.get(slo.name)
        out[slo.name] = _violation(att) if att is not None else 1.0
    out[LAUNCH_CONSTRAINT] = 0.0
    return out


def _violation(att: Attainment) -> float:
    if att.num_total == 0:
        return 1.0
    if att.slo.sli is SLI.ERROR_RATE:
        return (att.value or 0.0) - att.slo.threshold
    # Attainment.is_met allows 1e-12 of float noise; the constraint must agree with it.
    gap = att.slo.objective - att.attainment - 1e-12
    if gap <= 0 or att.value is None:
        return gap
    # Broken: also say by how much the observed percentile exceeds the threshold, so the
    # sampler can tell a near miss from a configuration far off (attainment alone moves in
    # steps of one request).
    return gap + max(0.0, att.value / att.slo.threshold - 1.0)


def failed(kind: ObjectiveKind, slos: Sequence[SLO], reason: str) -> Measurement:
    """The measurement of a configuration that could not run: infeasible, worst values."""
    constraints = {s.name: 1.0 for s in slos}
    constraints[LAUNCH_CONSTRAINT] = 1.0
    return Measurement(kind.failed_values, constraints, failure=reason)


MeasureFn = Callable[[float | None], Summary]


def evaluate_objective(
    kind: ObjectiveKind,
    measure: MeasureFn,
    slos: Sequence[SLO],
    *,
    rate: float | None,
    start_rate: float,
) -> Measurement:
    """Measure one opened configuration for ``kind``.

    Args:
        kind: the objective.
        measure: runs the workload at an offered rate (None: the trace's own timestamps)
            and returns its summary with the SLOs evaluated.
        slos: the SLOs (constraints).
        rate: the offered rate of goodput/throughput/pareto (None: trace times; throughput
            then saturates the engine).
        start_rate: where the capacity search starts.
    """
    if kind is ObjectiveKind.CAPACITY:
        return _capacity(measure, slos, start_rate)
    if kind is ObjectiveKind.THROUGHPUT and rate is None:
        rate = SATURATION_RATE
    summary = measure(rate)
    values: tuple[float, ...]
    if kind is ObjectiveKind.GOODPUT:
        values = (summary.goodput,)
    elif kind is ObjectiveKind.THROUGHPUT:
        values = (summary.output_token_throughput,)
    else:
        p99 = summary.ttft_ms.percentiles.get(99.0)
        values = (summary.output_token_throughput, p99 if p99 is not None else math.inf)
    return Measurement(
        values, slo_constraints(summary, slos), rate, summary, _curve({rate: summary})
    )


def _capacity(measure: MeasureFn, slos: Sequence[SLO], start_rate: float) -> Measurement:
    from slotune.collector.bench import find_max_rate

    # rate -> its run's summary, kept here too: a search stopped at the floor returns no curve
    runs: dict[float, Summary] = {}
    floor = start_rate * CAPACITY_FLOOR_FRACTION

    def recorded(r: float) -> Summary:
        if r < floor * (1 - 1e-9):
            raise _BelowFloor
        runs[r] = measure(r)
        return runs[r]

    try:
        result = find_max_rate(
            recorded,
            list(slos),
            start_rate=start_rate,
            rel_tolerance=CAPACITY_REL_TOLERANCE,
            max_steps=CAPACITY_MAX_STEPS,
        )
        max_rate = float(result.max_rate or 0.0)
    except _BelowFloor:
        max_rate = 0.0
    held = [r for r, s in runs.items() if s.all_slos_met]
    if max_rate > 0 and held:
        at = runs[min(held, key=lambda r: abs(r - max_rate))]
        return Measurement((max_rate,), slo_constraints(at, slos), max_rate, at, _curve(runs))
    # No rate held: report the violation at the gentlest rate tried, so the sampler
    # still sees how far from feasible the configuration is.
    lowest = min(runs)
    return Measurement(
        (0.0,),
        slo_constraints(runs[lowest], slos),
        lowest,
        runs[lowest],
        _curve(runs),
    )


class _BelowFloor(Exception):
    """The capacity search went below the lowest rate worth measuring."""


def _curve(
    runs: Mapping[float | None, Summary] | Mapping[float, Summary],
) -> tuple[CurvePoint, ...]:
    return tuple(
        CurvePoint(rate, s.goodput, s.all_slos_met)
        for rate, s in sorted(runs.items(), key=lambda kv: kv[0] or 0.0)
    )
