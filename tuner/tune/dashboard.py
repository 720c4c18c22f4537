"""A study as the dashboard draws it: Optuna's own figures, the trial table, its state.

The figures are ``optuna.visualization``'s (optimisation history, parameter importance,
parallel coordinates, slices, Pareto front), drawn on the first objective value (the
capacity / goodput / throughput the study maximises) with axes named with their units.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from slotune.collector.errors import ConfigError
from slotune.collector.store import StudyStatus, default_db_url
from slotune.tuner.tune.worker import WorkerView

# Objective value names (``ObjectiveKind.value_names``) as axis titles, with their units.
AXIS_NAMES = {
    "capacity": "capacity (req/s within the SLOs)",
    "goodput": "goodput (req/s)",
    "output_token_throughput": "output throughput (tokens/s)",
    "ttft_ms.p99": "TTFT p99 (ms)",
}


def axis_name(value_name: str) -> str:
    return AXIS_NAMES.get(value_name, value_name)


@dataclass(frozen=True, slots=True)
class StudyFigures:
    """Plotly figures of a study; None where the study has too few trials for one."""

    history: Any
    importance: Any | None
    parallel: Any | None
    slices: Any | None
    pareto: Any | None


@dataclass(frozen=True, slots=True)
class StudyState:
    """A study's status as the page shows it, and why when it is not the stored one."""

    status: str
    reason: str = ""


def study_state(stored: str, worker: WorkerView | None) -> StudyState:
    """A study stored as running whose worker died is stopped: its process is gone or stopped
    beating, so no trial will come (``tune resume`` continues it)."""
    if stored != StudyStatus.RUNNING.value or worker is None or worker.state != "died":
        return StudyState(stored)
    info = worker.info
    return StudyState(
        StudyStatus.STOPPED.value,
        f"its worker (pid {info.pid} on {info.host}) stopped beating at "
        f"{dt.datetime.fromtimestamp(info.heartbeat_at, dt.UTC):%Y-%m-%d %H:%M:%S} UTC",
    )


def trial_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The trial table: each SLO's measured value under the SLO's own percentile (``ITL p95``
    for ``itl:p95<=50ms``), then one column per parameter."""
    details = report["trial_details"]
    params = list(dict.fromkeys(k for t in details for k in t["params"]))
    # a column is numbers or text throughout, so the table keeps one type per column
    numeric = {k: all(_is_number(t["params"].get(k)) for t in details) for k in params}
    rows = []
    for t in details:
        measured = ((t["measurement"] or {}).get("slo_attainment")) or []
        row: dict[str, Any] = {
            "#": t["number"],
            "state": t["state"],
            "source": t["source"],
            "value": (t["values"] or [None])[0],
            "feasible": t["feasible"],
        }
        row.update({slo_column(a["spec"], a.get("unit")): a.get("value") for a in measured})
        for k in params:
            v = t["params"].get(k)
            row[f"{PARAM_PREFIX}{k}"] = v if v is None or numeric[k] else str(v)
        row["failure"] = t["failure"] or ""
        row["duration (s)"] = t["duration_s"]
        rows.append(row)
    return rows


def _is_number(value: Any) -> bool:
    """A missing value fits any column; a bool is shown as text."""
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


PARAM_PREFIX = "param: "


def slo_column(spec: str, unit: str | None) -> str:
    """``itl:p95<=50ms`` -> ``itl:p95<=50ms (measured, ms)``."""
    return f"{spec} (measured{', ms' if unit == 'ms' else ''})"


def _first_value(t: FrozenTrial) -> float:
    return t.values[0] if t.values else float("nan")


def study_figures(name: str, url: str | None, value_names: Sequence[str]) -> StudyFigures:
    """Optuna's figures of the stored study ``name``.

    Args:
        name: the study name.
        url: the store URL (None: the default SQLite file).
        value_names: the objective values' names (``ObjectiveKind.value_names``).

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
            first = axis_name(value_names[0])
            history = vis.plot_optimization_history(study, target=_first_value, target_name=first)
            importance = _try(
                lambda: vis.plot_param_importances(study, target=_first_value, target_name=first)
            )
            parallel = _try(
                lambda: vis.plot_parallel_coordinate(study, target=_first_value, target_name=first)
            )
            slices = _try(lambda: vis.plot_slice(study, target=_first_value, target_name=first))
            pareto = (
                _try(
                    lambda: vis.plot_pareto_front(
                        study, target_names=[axis_name(v) for v in value_names]
                    )
                )
                if len(study.directions) > 1
                else None
            )
        return StudyFigures(history, importance, parallel, slices, pareto)
    finally:
        storage.engine.dispose()


def _try(draw: Any) -> Any | None:
    try:
        return draw()
    except (RuntimeError, ValueError, ZeroDivisionError):
        # Too few completed trials, or every trial with one configuration.
        return None
