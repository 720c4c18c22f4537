"""What a study found: trials, best vs default, Pareto front, importance, and why nothing held.

:func:`study_report` returns a frozen :class:`StudyReport`; ``to_dict()`` is its JSON form, the
same for ``slotune tune --json``, ``tune show --json``, the store row and the dashboard:

- ``trials`` / ``feasible`` / ``failed``: completed trials, those meeting every SLO, those
  whose engine did not start or crashed.
- ``best``: the best feasible trial (after the robustness re-check when it ran: worst value
  over its re-runs; a configuration that broke an SLO on a re-run is out), with ``params``
  (the parameters as the engine got them), ``config`` (everything it was started with),
  ``value``.
- ``default``: trial 0, the engine's default configuration; ``gain`` = best / default value,
  claimed only where the default's measurement reached its limit (an SLO broke or the engine
  saturated) and ``best - default`` exceeds the spread between repeats (:mod:`tuner.tune.gain`);
  otherwise None and ``gain_note`` says why (``gain_difference``, ``gain_spread``).
- every trial's ``limit``: what bounded its figure (``slo``, ``saturation``, ``offered_load``:
  the trial could not tell configurations apart, ``not_run``).
- an ``attach`` trial's ``config`` is what the server runs (``engine.server_config``), not
  the tuner's assumed defaults.
- ``infeasibility`` (only when no trial met every SLO): the closest trial (smallest SLO
  shortfall), each SLO's attainment against its objective in that trial's run at the lowest
  rate tried, with the per-request percentile the SLO counts next to the run's pooled one, and
  the parameters that moved the shortfall most.
- ``pareto_front`` (objective ``pareto``), ``importance`` (fANOVA over feasible trials),
  ``trial_details`` (every trial: state, params, measurement, constraints, failure reason).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from slotune.collector.slo import SLI, Attainment
from slotune.collector.summary import Summary
from slotune.tuner.engines.param import Value
from slotune.tuner.tune.backends.server_config import SERVER_CONFIG_KEY
from slotune.tuner.tune.gain import LIMIT_NOTES, GainVerdict, Limit, judge_gain, trial_limit
from slotune.tuner.tune.objectives import LAUNCH_CONSTRAINT, CurvePoint, Measurement, ObjectiveKind
from slotune.tuner.tune.rechecks import (
    DefaultRepeats,
    Recheck,
    stored_default_repeats,
    stored_rechecks,
)
from slotune.tuner.tune.space import SearchSpace
from slotune.tuner.tune.study import (
    CONFIG_ATTR,
    FORCED_ATTR,
    MEASUREMENT_ATTR,
    SOURCE_ATTR,
    StudySpec,
    build_space,
    is_feasible,
    load_plan,
)

PRESCREEN_ATTR = "prescreen"
_MOVERS = 3


@dataclass(frozen=True, slots=True)
class TrialReport:
    """One trial as the report shows it (values as the engine ran them, not Optuna's indexes).

    ``summary`` is the reported run's (None when nothing ran); the JSON carries its headline
    figures as ``measurement``.
    """

    number: int
    state: str
    source: str
    params: dict[str, Value]
    config: dict[str, Value]
    values: list[float | None] | None
    feasible: bool
    constraints: dict[str, float]
    failure: str | None
    rate: float | None
    summary: Summary | None
    curve: tuple[CurvePoint, ...]
    engine: Mapping[str, Any]
    duration_s: float | None
    unsteady_rates: tuple[float, ...] = ()
    limit: str = Limit.NOT_RUN.value
    limit_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "state": self.state,
            "source": self.source,
            "params": dict(self.params),
            "config": dict(self.config),
            "values": None if self.values is None else list(self.values),
            "feasible": self.feasible,
            "constraints": dict(self.constraints),
            "failure": self.failure,
            "rate": self.rate,
            "measurement": {} if self.summary is None else _brief(self.summary),
            "curve": [list(p) for p in self.curve],
            "engine": dict(self.engine),
            "duration_s": self.duration_s,
            "unsteady_rates": list(self.unsteady_rates),
            "limit": self.limit,
            "limit_note": self.limit_note,
        }


@dataclass(frozen=True, slots=True)
class BestTrial:
    """The best feasible configuration (``robust``: its value is the worst over re-runs)."""

    number: int
    params: dict[str, Value]
    config: dict[str, Value]
    value: float
    robust: bool
    values_by_seed: dict[str, float] | None = None


@dataclass(frozen=True, slots=True)
class DefaultTrial:
    """Trial 0: the engine's default configuration."""

    number: int
    params: dict[str, Value]
    config: dict[str, Value]
    value: float | None
    feasible: bool
    failure: str | None
    limit: str = Limit.NOT_RUN.value
    values_by_seed: dict[str, float] | None = None


@dataclass(frozen=True, slots=True)
class SloShortfall:
    """One SLO in one run.

    Attributes:
        spec: the SLO's shorthand.
        attainment: share of events within the threshold (token gaps for ``itl``, else
            requests).
        objective: the share it needs.
        met: whether it held.
        observed_ms: the run's observed percentile, the one the SLO counts (the run
            summary's and the dashboard's; None for ``error_rate``).
    """

    spec: str
    attainment: float
    objective: float
    met: bool
    observed_ms: float | None


@dataclass(frozen=True, slots=True)
class Infeasibility:
    """Why no configuration met every SLO.

    Attributes:
        closest: the trial with the smallest SLO shortfall.
        rate: the offered rate of that trial's reported run (capacity: the lowest tried).
        slos: each SLO in that run.
        movers: parameter -> share of the shortfall's variation it explains (largest first).
    """

    closest: int
    rate: float | None
    slos: tuple[SloShortfall, ...]
    movers: dict[str, float]


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    """A feasible trial no other beats on both objectives."""

    number: int
    params: dict[str, Value]
    values: list[float]


@dataclass(frozen=True, slots=True)
class StudyListing:
    """One stored study as ``slotune tune list`` shows it: status and headline result."""

    name: str
    status: str
    backend: str
    engine: str
    model: str
    gpu: str
    workload: str
    objective: str
    slos: tuple[str, ...]
    trials: int | None
    best_value: float | None
    gain: float | None
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``slotune tune list --json``."""
        return dataclasses.asdict(self) | {"slos": list(self.slos)}


@dataclass(frozen=True, slots=True)
class StudyReport:
    """What a study found (see the module docstring)."""

    name: str
    backend: str
    engine: str
    model: str
    gpu: str
    workload: str
    slos: list[str]
    objective: str
    value_names: list[str]
    target_trials: int
    trials: int
    feasible: int
    failed: int
    running: int
    best: BestTrial | None
    default: DefaultTrial | None
    gain: float | None
    gain_note: str | None
    gain_difference: float | None
    gain_spread: float | None
    robustness: list[Recheck]
    prescreen: dict[str, Any] | None
    importance: dict[str, float]
    infeasibility: Infeasibility | None = None
    pareto_front: list[ParetoPoint] | None = None
    trial_details: list[TrialReport] = field(default_factory=list)

    def to_dict(self, *, details: bool = True) -> dict[str, Any]:
        """The JSON form (``details`` False leaves out ``trial_details``)."""
        # trial details have their own JSON form, which asdict would not use
        out = dataclasses.asdict(dataclasses.replace(self, trial_details=[]))
        if details:
            out["trial_details"] = [t.to_dict() for t in self.trial_details]
        else:
            out.pop("trial_details")
        return out


def trial_params(t: FrozenTrial, space: SearchSpace | None = None) -> dict[str, Value]:
    """The parameters as the engine got them: the configuration's values for the searched
    names (an ordered choice is an index to Optuna), plus values passed outside the space.

    A trial that failed before its configuration was recorded is read through ``space``.
    """
    config = run_config(t)
    forced = t.user_attrs.get(FORCED_ATTR) or {}
    params = space.engine_values(t.params) if space is not None else dict(t.params)
    return {**{k: config.get(k, v) for k, v in params.items()}, **forced}


def _measurement(t: FrozenTrial) -> Measurement:
    values = t.values if t.state is TrialState.COMPLETE else ()
    return Measurement.from_attrs(t.user_attrs.get(MEASUREMENT_ATTR) or {}, values, t.constraints)


def run_config(t: FrozenTrial) -> dict[str, Value]:
    """The configuration the engine ran: what the trial started it with, or for an attached
    server what it was read to run (parameters that could not be read keep the assumed
    value and are listed in ``engine.server_config.unknown``)."""
    config = dict(t.user_attrs.get(CONFIG_ATTR) or {})
    server = _measurement(t).engine.get(SERVER_CONFIG_KEY) or {}
    read = server.get("values") or {}
    return {**config, **{k: v for k, v in read.items() if k in config}}


def _limit(t: FrozenTrial, kind: ObjectiveKind) -> Limit:
    return trial_limit(kind, _measurement(t)) if t.state is TrialState.COMPLETE else Limit.NOT_RUN


def trial_report(
    t: FrozenTrial, space: SearchSpace | None = None, kind: ObjectiveKind = ObjectiveKind.CAPACITY
) -> TrialReport:
    m = _measurement(t)
    limit = _limit(t, kind)
    return TrialReport(
        number=t.number,
        state=t.state.name.lower(),
        source=t.user_attrs.get(SOURCE_ATTR, "sampler"),
        params=trial_params(t, space),
        config=run_config(t),
        values=_json_values(t.values),
        feasible=t.state is TrialState.COMPLETE and is_feasible(t),
        constraints=dict(t.constraints),
        failure=m.failure,
        rate=m.rate,
        summary=m.summary,
        curve=m.curve,
        engine=m.engine,
        duration_s=t.duration.total_seconds() if t.duration else None,
        unsteady_rates=m.unsteady_rates,
        limit=limit.value,
        limit_note=LIMIT_NOTES[limit],
    )


def _json_values(values: Sequence[float] | None) -> list[float | None] | None:
    if values is None:
        return None
    return [v if math.isfinite(v) else None for v in values]


def _brief(s: Summary) -> dict[str, Any]:
    """The headline figures of a trial's run, as ``trial_details[].measurement``."""
    out: dict[str, Any] = {
        "request_throughput": s.request_throughput,
        "output_token_throughput": s.output_token_throughput,
        "goodput": s.goodput,
        "num_requests": s.num_requests,
        "num_errors": s.num_errors,
        "slos_met": s.all_slos_met,
    }
    for metric, d in (
        ("ttft_ms", s.ttft_ms),
        ("itl_ms", s.itl_ms),
        ("tpot_ms", s.tpot_ms),
        ("e2e_ms", s.e2e_ms),
    ):
        out[metric] = {"p50": d.p50, "p99": d.p99, "mean": d.mean}
    out["slo_attainment"] = [a.to_dict() for a in s.slo_attainment]
    return out


def _best_trial(done: list[FrozenTrial]) -> FrozenTrial | None:
    feasible = [t for t in done if is_feasible(t) and t.values]
    return max(feasible, key=lambda t: (t.values[0], -t.number)) if feasible else None


def _pareto_front(done: list[FrozenTrial]) -> list[FrozenTrial]:
    """Feasible trials not dominated on (maximise values[0], minimise values[1])."""
    pts = [t for t in done if is_feasible(t) and t.values and math.isfinite(t.values[1])]
    front = []
    for t in pts:
        dominated = any(
            o.values[0] >= t.values[0]
            and o.values[1] <= t.values[1]
            and (o.values[0] > t.values[0] or o.values[1] < t.values[1])
            for o in pts
        )
        if not dominated:
            front.append(t)
    return sorted(front, key=lambda t: -t.values[0])


def _importance(
    study: optuna.Study, trials: list[FrozenTrial], target: Callable[[FrozenTrial], float]
) -> dict[str, float]:
    """fANOVA importance of the parameters for ``target`` over ``trials`` ({} when too few)."""
    if len(trials) < 3 or len({target(t) for t in trials}) < 2:
        return {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            imp = optuna.importance.get_param_importances(study, target=target)
    except (RuntimeError, ValueError):
        # Too few distinct values (e.g. every trial had one config) to fit the evaluator.
        return {}
    return {k: float(v) for k, v in imp.items()}


def shortfall(t: FrozenTrial) -> float:
    """How far a trial is from meeting every SLO: the sum of its broken SLO constraints."""
    return sum(max(0.0, v) for k, v in t.constraints.items() if k != LAUNCH_CONSTRAINT)


def _ran(t: FrozenTrial) -> bool:
    return t.constraints.get(LAUNCH_CONSTRAINT, 0.0) <= 0


def _infeasibility(study: optuna.Study, done: list[FrozenTrial]) -> Infeasibility | None:
    ran = [t for t in done if _ran(t) and _measurement(t).summary is not None]
    if not ran:
        return None
    closest = min(ran, key=lambda t: (shortfall(t), t.number))
    m = _measurement(closest)
    slos = tuple(_slo_shortfall(a) for a in m.summary.slo_attainment) if m.summary else ()
    numbers = {t.number for t in ran}
    movers = _importance(study, ran, lambda t: -shortfall(t) if t.number in numbers else 0.0)
    top = dict(sorted(movers.items(), key=lambda kv: -kv[1])[:_MOVERS])
    return Infeasibility(closest.number, m.rate, slos, top)


def _slo_shortfall(att: Attainment) -> SloShortfall:
    return SloShortfall(
        spec=att.slo.spec,
        attainment=att.attainment,
        objective=att.slo.objective,
        met=att.is_met,
        observed_ms=None
        if att.slo.sli is SLI.ERROR_RATE or att.value is None
        else att.value * 1000.0,
    )


def _best_entry(best: FrozenTrial | None, rechecks: Sequence[Recheck]) -> BestTrial | None:
    if rechecks:
        robust_ok = [r for r in rechecks if r.feasible]
        if not robust_ok:
            return None
        r = max(robust_ok, key=lambda r: r.worst_value)
        return BestTrial(r.number, r.params, r.config, r.worst_value, True, dict(r.values_by_seed))
    if best is None:
        return None
    return BestTrial(best.number, trial_params(best), run_config(best), best.values[0], False)


def _default_entry(
    default: FrozenTrial | None,
    kind: ObjectiveKind,
    repeats: DefaultRepeats | None,
    rechecks: Sequence[Recheck],
) -> DefaultTrial | None:
    if default is None:
        return None
    by_seed = (
        repeats.values_by_seed if repeats is not None and repeats.number == default.number else None
    )
    # The default re-checked as the best: its re-check runs are its repeats.
    by_seed = by_seed or next(
        (r.values_by_seed for r in rechecks if r.number == default.number), None
    )
    return DefaultTrial(
        number=default.number,
        params=trial_params(default),
        config=run_config(default),
        value=(_json_values(default.values) or [None])[0],
        feasible=is_feasible(default),
        failure=_measurement(default).failure,
        limit=_limit(default, kind).value,
        values_by_seed=dict(by_seed) if by_seed else None,
    )


def study_report(study: optuna.Study, spec: StudySpec, *, details: bool = True) -> StudyReport:
    """Summarise a study (see the module docstring)."""
    space = build_space(spec, load_plan(spec)) if details else None
    trials = study.get_trials(deepcopy=False)
    done = [t for t in trials if t.state is TrialState.COMPLETE]
    rechecks = stored_rechecks(study)
    default = _default_entry(
        next((t for t in done if t.user_attrs.get(SOURCE_ATTR) == "default"), None),
        spec.objective,
        stored_default_repeats(study),
        rechecks,
    )
    best = _best_entry(_best_trial(done), rechecks)
    verdict = _gain(best, default)
    num_feasible = sum(is_feasible(t) for t in done)
    feasible_numbers = {t.number for t in done if is_feasible(t)}
    return StudyReport(
        name=spec.name,
        backend=spec.backend.value,
        engine=spec.engine.value,
        model=spec.model,
        gpu=spec.gpu,
        workload=spec.workload_name,
        slos=list(spec.slos),
        objective=spec.objective.value,
        value_names=spec.objective.value_names,
        target_trials=spec.trials,
        trials=len(done),
        feasible=num_feasible,
        failed=sum(not _ran(t) for t in done),
        running=sum(t.state is TrialState.RUNNING for t in trials),
        best=best,
        default=default,
        gain=verdict.gain,
        gain_note=verdict.note,
        gain_difference=verdict.difference,
        gain_spread=verdict.spread,
        robustness=list(rechecks),
        prescreen=study.user_attrs.get(PRESCREEN_ATTR),
        importance=_importance(
            study, done, lambda t: t.values[0] if t.number in feasible_numbers else 0.0
        )
        if num_feasible >= 3
        else {},
        infeasibility=_infeasibility(study, done) if done and not num_feasible else None,
        pareto_front=[
            ParetoPoint(t.number, trial_params(t), list(t.values)) for t in _pareto_front(done)
        ]
        if spec.objective is ObjectiveKind.PARETO
        else None,
        trial_details=[trial_report(t, space, spec.objective) for t in trials] if details else [],
    )


def _gain(best: BestTrial | None, default: DefaultTrial | None) -> GainVerdict:
    if best is None:
        return GainVerdict(None, "no configuration met every SLO")
    if default is None:
        return GainVerdict(None, "the default configuration has not been measured yet")
    if not default.feasible or not default.value:
        why = default.failure or "it broke an SLO"
        return GainVerdict(None, f"the default configuration is infeasible ({why})")
    if best.number == default.number and default.limit != Limit.OFFERED_LOAD.value:
        return GainVerdict(1.0, "the default is the best configuration found", 0.0)
    return judge_gain(
        best.value,
        default.value,
        Limit(default.limit),
        list((best.values_by_seed or {}).values()),
        list((default.values_by_seed or {}).values()),
    )
