"""Sim -> real: screen the space on the simulator, start the real study from its best.

``--prescreen sim`` runs a simulated study of the same engine, model, GPU, workload, SLOs and
objective first (``NAME-prescreen``, ``SIM_TRIALS_PER_REAL`` times as many trials as the real
study, at least ``MIN_SIM_TRIALS``), then enqueues its best ``k`` distinct feasible
configurations into the real study right after the default, so the real sampler starts
from the region the simulator found.

Trials saved (an estimate, stated as such in the report): how many sampled trials the
simulated search needed before it first came within 3 % of its own best, minus how many real
trials the seeded study needed to come within 3 % of *its* best. Both counts exclude trial 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from slotune.tuner.tune.backends import BackendKind
from slotune.tuner.tune.report import PRESCREEN_ATTR
from slotune.tuner.tune.study import (
    CONFIG_ATTR,
    SOURCE_ATTR,
    ProgressFn,
    StudySpec,
    build_space,
    create,
    is_feasible,
    load,
    load_plan,
    run_workers,
)

SIM_TRIALS_PER_REAL = 4
MIN_SIM_TRIALS = 40
WITHIN = 0.03


def prescreen_spec(spec: StudySpec, trials: int | None = None) -> StudySpec:
    """The simulated twin of ``spec`` (``trials`` default: the rule in the module docstring)."""
    if trials is None:
        trials = max(MIN_SIM_TRIALS, SIM_TRIALS_PER_REAL * spec.trials)
    return dataclasses.replace(
        spec,
        name=f"{spec.name}-prescreen",
        backend=BackendKind.SIM,
        command=None,
        endpoint=None,
        speedup=1.0,
        trials=trials,
    )


def run_prescreen(
    spec: StudySpec,
    url: str,
    k: int,
    *,
    trials: int | None = None,
    workers: int = 1,
    progress: ProgressFn | None = None,
) -> list[dict[str, Any]]:
    """Run the simulated study of ``spec`` and return its best ``k`` distinct configs."""
    sim_spec = prescreen_spec(spec, trials)
    create(sim_spec, url)
    run_workers(sim_spec, url, workers, progress)
    sim = load(sim_spec, url)
    done = sorted(
        (
            t
            for t in sim.get_trials(deepcopy=False)
            if t.state is TrialState.COMPLETE and is_feasible(t) and t.values
        ),
        key=lambda t: (-t.values[0], t.number),
    )
    picked: list[dict[str, Any]] = []
    seen: set[str] = set()
    for t in done:
        key = repr(sorted(t.user_attrs.get(CONFIG_ATTR, {}).items()))
        if key not in seen:
            seen.add(key)
            picked.append(t.user_attrs[CONFIG_ATTR])
        if len(picked) == k:
            break
    return picked


def seed_study(
    study: optuna.Study,
    spec: StudySpec,
    configs: Sequence[dict[str, Any]],
    sim_study_name: str,
    sim_trials_to_reach: int | None,
) -> None:
    """Enqueue the prescreened configurations into the real study and note where they came from."""
    space = build_space(spec, load_plan(spec))
    for config in configs:
        study.enqueue_trial(
            space.params_of(config), user_attrs={SOURCE_ATTR: "prescreen"}, skip_if_exists=True
        )
    study.set_user_attr(
        PRESCREEN_ATTR,
        {
            "study": sim_study_name,
            "seeded": len(configs),
            "sim_trials_to_reach": sim_trials_to_reach,
        },
    )


def trials_to_reach(trials: Sequence[FrozenTrial], within: float = WITHIN) -> int | None:
    """Trials (after trial 0, in order) until the first feasible one within ``within`` of the
    best feasible value; None when nothing was feasible."""
    done = sorted((t for t in trials if t.state is TrialState.COMPLETE), key=lambda t: t.number)
    values = [t.values[0] if is_feasible(t) and t.values else None for t in done]
    feasible = [v for v in values if v is not None]
    if not feasible:
        return None
    best = max(feasible)
    for i, v in enumerate(values):
        if v is not None and v >= (1 - within) * best:
            return max(i, 0)
    return None


def record_savings(study: optuna.Study) -> dict[str, Any] | None:
    """Compute and store the trials-saved estimate once the real study has finished."""
    info = study.user_attrs.get(PRESCREEN_ATTR)
    if not info:
        return None
    real = trials_to_reach(study.get_trials(deepcopy=False))
    sim = info.get("sim_trials_to_reach")
    saved = max(0, sim - real) if sim is not None and real is not None else None
    info = {**info, "real_trials_to_reach": real, "trials_saved": saved}
    study.set_user_attr(PRESCREEN_ATTR, info)
    return info
