"""A study as the dashboard draws it: Optuna's own figures and the trial table.

The figures are ``optuna.visualization``'s (optimisation history, parameter importance,
Pareto front), drawn on the first objective value (the capacity / goodput / throughput the
study maximises) with infeasible trials greyed as Optuna does for constrained studies.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from slotune.collector.errors import ConfigError
from slotune.collector.store import default_db_url


@dataclass(frozen=True, slots=True)
class StudyFigures:
    """Plotly figures of a study; None where the study has too few trials for one."""

    history: Any
    importance: Any | None
    pareto: Any | None


def _first_value(t: FrozenTrial) -> float:
    return t.values[0] if t.values else float("nan")


def study_figures(name: str, url: str | None, value_name: str) -> StudyFigures:
    """Optuna's figures of the stored study ``name``.

    Args:
        name: the study name.
        url: the store URL (None: the default SQLite file).
        value_name: the first objective's name with its unit, for the axes.

    Raises:
        ConfigError: no study of that name.
    """
    import optuna.visualization as vis

    storage = optuna.storages.RDBStorage(url or default_db_url())
    try:
        try:
            study = optuna.load_study(study_name=name, storage=storage)
        except KeyError as e:
            raise ConfigError(
                f"no study named {name!r}; `slotune tune list` shows the stored ones"
            ) from e
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna marks its figures experimental
            history = vis.plot_optimization_history(
                study, target=_first_value, target_name=value_name
            )
            importance = _try(lambda: vis.plot_param_importances(study, target=_first_value))
            pareto = (
                _try(lambda: vis.plot_pareto_front(study, constraints_func=None))
                if len(study.directions) > 1
                else None
            )
        return StudyFigures(history, importance, pareto)
    finally:
        storage.engine.dispose()


def _try(draw: Any) -> Any | None:
    try:
        return draw()
    except (RuntimeError, ValueError, ZeroDivisionError):
        # Too few completed trials, or every trial with one configuration.
        return None
