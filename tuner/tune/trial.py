"""One trial: bring an engine up with a configuration, measure the objective, stop it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from slotune.collector.slo import SLO
from slotune.collector.summary import Summary
from slotune.collector.workload import Trace, retime
from slotune.tuner.engines.param import Value
from slotune.tuner.tune.backends.base import Backend, TrialFailed
from slotune.tuner.tune.objectives import Measurement, ObjectiveKind, evaluate_objective, failed
from slotune.tuner.tune.steady import is_steady

MAX_EXTENSIONS = 4


@dataclass(frozen=True, slots=True)
class WorkloadPlan:
    """The workload every trial serves.

    Attributes:
        trace: the requests (already cut to ``--num-requests``).
        rate: offered rate in req/s (None: the trace's own timestamps).
        source: the whole workload ``trace`` was cut from (longer runs take their requests
            from it; None: ``trace`` is the whole workload).
    """

    trace: Trace
    rate: float | None = None
    source: Trace | None = None

    @property
    def start_rate(self) -> float:
        """Where the capacity search starts: the offered rate, else the trace's own."""
        if self.rate is not None:
            return self.rate
        mean = self.trace.mean_rate
        return mean if math.isfinite(mean) and mean > 0 else 1.0

    def longer(self, factor: int) -> WorkloadPlan | None:
        """The plan with ``factor`` times as many requests, taken in order from the workload
        (None when the workload has no more)."""
        source = self.source or self.trace
        n = len(self.trace)
        if n >= len(source):
            return None
        return replace(self, trace=replace(source, requests=source.requests[: n * factor]))

    def at(self, rate: float | None, seed: int) -> Trace:
        """The trace re-timed as a Poisson process at ``rate`` seeded by ``seed``.

        With ``rate`` None the trace keeps its own timestamps; seed 0 keeps its order too,
        other seeds deal its requests to those timestamps in another order (the re-check's
        "other arrival order").
        """
        if rate is not None:
            return retime(self.trace, rate=rate, seed=seed)
        if seed == 0:
            return self.trace
        reqs = self.trace.requests
        order = np.random.default_rng(seed).permutation(len(reqs))
        shuffled = tuple(
            replace(reqs[int(i)], timestamp_s=r.timestamp_s)
            for i, r in zip(order, reqs, strict=True)
        )
        return replace(self.trace, requests=shuffled)


@dataclass(frozen=True, slots=True)
class TrialRunner:
    """Everything a worker needs to measure configurations."""

    backend: Backend
    plan: WorkloadPlan
    slos: tuple[SLO, ...]
    kind: ObjectiveKind

    def measure(self, config: Mapping[str, Value], seed: int = 0) -> Measurement:
        """Measure one configuration; a refused or crashed engine is an infeasible result.

        Every run is checked for steady state (:mod:`tuner.tune.steady`); one that is not is run
        again with twice the requests, up to ``MAX_EXTENSIONS`` times (past a rate the engine
        cannot sustain, the queue then grows into the SLOs as it would in production), and the
        rates still
        unsteady after that are listed in the measurement.
        """
        unsteady: list[float] = []
        try:
            with self.backend.open(config) as session:

                def measure(rate: float | None) -> Summary:
                    # A run at a rate the engine does not sustain but too short for the
                    # queue to show it is run again on a longer trace.
                    plan: WorkloadPlan | None = self.plan
                    summary = session.run(self.plan.at(rate, seed), self.slos, seed)
                    for _ in range(MAX_EXTENSIONS):
                        if rate is None or is_steady(summary):
                            break
                        plan = plan.longer(2) if plan else None
                        if plan is None:
                            break
                        summary = session.run(plan.at(rate, seed), self.slos, seed)
                    if rate is not None and not is_steady(summary):
                        unsteady.append(rate)
                    return summary

                m = evaluate_objective(
                    self.kind,
                    measure,
                    self.slos,
                    rate=self.plan.rate,
                    start_rate=self.plan.start_rate,
                )
                engine = session.engine_metrics()
        except TrialFailed as e:
            return failed(self.kind, self.slos, str(e))
        return replace(m, engine=engine, unsteady_rates=tuple(unsteady))
