"""Repeat the best and the default configuration until their difference stands out of noise.

After the re-check (:mod:`tuner.tune.robustness`) the best configuration has values from several
seeds. The default is measured with the same seeds, and while the best's worst run does not
beat the default's best run, both are measured once more with a new seed, up to
:data:`tuner.tune.gain.MAX_EXTRA_ROUNDS` times. The best's extra runs join its re-check entry (its
value stays the worst of its runs); the default's are kept on the study (user attribute
``default_repeats``). :func:`tuner.tune.gain.judge_gain` then decides whether the study claims a gain.
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from slotune.tuner.tune.gain import MAX_EXTRA_ROUNDS, Limit, are_apart, trial_limit
from slotune.tuner.tune.objectives import Measurement
from slotune.tuner.tune.rechecks import (
    DEFAULT_REPEATS_ATTR,
    DefaultRepeats,
    Recheck,
    store_rechecks,
    stored_rechecks,
)
from slotune.tuner.tune.study import CONFIG_ATTR, MEASUREMENT_ATTR, SOURCE_ATTR, is_feasible
from slotune.tuner.tune.trial import TrialRunner


def repeat_for_gain(
    study: optuna.Study, runner: TrialRunner, *, max_extra_rounds: int = MAX_EXTRA_ROUNDS
) -> DefaultRepeats | None:
    """Measure the default with the re-checked best's seeds, and both again while their
    runs overlap (:func:`tuner.tune.gain.are_apart`). Returns what was stored, None when nothing was to do
    (no re-check, no feasible best or default, the default is the best, or the default was
    limited by the offered load, where no gain is claimed whatever the repeats say)."""
    rechecks = stored_rechecks(study)
    default = _default_trial(study)
    feasible = [r for r in rechecks if r.feasible]
    if not feasible or default is None or not is_feasible(default) or not default.values:
        return None
    measurement = Measurement.from_attrs(default.user_attrs.get(MEASUREMENT_ATTR) or {})
    if trial_limit(runner.kind, measurement) is Limit.OFFERED_LOAD:
        return None
    best = max(feasible, key=lambda r: r.worst_value)
    if best.number == default.number:
        return None
    config = default.user_attrs[CONFIG_ATTR]
    values = {"0": float(default.values[0])}
    for key in best.values_by_seed:
        if key not in values:
            values[key] = runner.measure(config, int(key)).values[0]
    rounds = 0
    while rounds < max_extra_rounds and best.feasible and not _apart(best, values):
        seed = max(int(s) for s in [*values, *best.values_by_seed]) + 1
        m = runner.measure(best.config, seed)
        best = best.with_run(seed, m.values[0], m.is_feasible)
        values[str(seed)] = runner.measure(config, seed).values[0]
        rounds += 1
    stored = DefaultRepeats(default.number, values, rounds)
    store_rechecks(study, tuple(best if r.number == best.number else r for r in rechecks))
    study.set_user_attr(DEFAULT_REPEATS_ATTR, stored.to_attrs())
    return stored


def _apart(best: Recheck, default_values: dict[str, float]) -> bool:
    return are_apart(list(best.values_by_seed.values()), list(default_values.values()))


def _default_trial(study: optuna.Study) -> FrozenTrial | None:
    for t in study.get_trials(deepcopy=False):
        if t.state is TrialState.COMPLETE and t.user_attrs.get(SOURCE_ATTR) == "default":
            return t
    return None
