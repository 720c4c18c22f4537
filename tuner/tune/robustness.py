"""Re-measure the best configurations with other seeds before trusting them.

A study's ranking rests on one arrival order per configuration; a configuration can look best
because the order happened to suit it. The best ``top_k`` distinct feasible configurations are
measured again with ``num_seeds`` other seeds (other Poisson arrival orders, other simulator
seeds). The value that counts is the worst one seen, and a configuration that breaks an SLO
on any re-run is out. Results are kept on the study (user attribute ``robustness``).
"""

from __future__ import annotations

from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from slotune.tuner.tune.rechecks import Recheck, store_rechecks
from slotune.tuner.tune.report import trial_params
from slotune.tuner.tune.study import CONFIG_ATTR, is_feasible
from slotune.tuner.tune.trial import TrialRunner


def recheck(
    study: optuna.Study,
    runner: TrialRunner,
    *,
    top_k: int = 3,
    num_seeds: int = 2,
    first_seed: int = 1,
    on_run: Callable[[], None] | None = None,
) -> tuple[Recheck, ...]:
    """Re-measure the best ``top_k`` feasible configurations and store the worst cases.

    Args:
        study: a finished single-objective study.
        runner: measures configurations (same backend, workload, SLOs, objective).
        top_k: how many of the best distinct configurations to re-measure.
        num_seeds: re-runs per configuration, with seeds ``first_seed, first_seed + 1, ...``.
        on_run: called after every re-run (progress).

    Returns:
        One entry per re-checked configuration, best original value first.
    """
    done = [
        t
        for t in study.get_trials(deepcopy=False)
        if t.state is TrialState.COMPLETE and is_feasible(t) and t.values
    ]
    done.sort(key=lambda t: (-t.values[0], t.number))
    picked, seen = [], set()
    for t in done:
        key = repr(sorted(t.user_attrs.get(CONFIG_ATTR, {}).items()))
        if key not in seen:
            seen.add(key)
            picked.append(t)
        if len(picked) == top_k:
            break
    results = []
    for t in picked:
        config = t.user_attrs[CONFIG_ATTR]
        r = Recheck(t.number, trial_params(t), config, {"0": t.values[0]}, t.values[0], True)
        for seed in range(first_seed, first_seed + num_seeds):
            m = runner.measure(config, seed)
            r = r.with_run(seed, m.values[0], m.is_feasible)
            if on_run:
                on_run()
        results.append(r)
    store_rechecks(study, tuple(results))
    return tuple(results)
