"""What a study found: trials, best vs default, Pareto front, parameter importance.

The report is plain JSON-able data, the same for ``slotune tune --json``, ``tune show --json``
and the dashboard. Keys:

- ``trials`` / ``feasible`` / ``failed``: completed trials, those meeting every SLO, those
  whose engine did not start or crashed.
- ``best``: the best feasible trial (after the robustness re-check when it ran: worst value
  over its re-runs; a configuration that broke an SLO on a re-run is out), with ``params``
  (the sampled parameters), ``config`` (everything the engine was started with), ``value``.
- ``default``: trial 0, the engine's default configuration; ``gain`` = best / default value
  (None when the default broke an SLO, ``gain_note`` says so).
- ``pareto_front`` (objective ``pareto``), ``importance`` (fANOVA over feasible trials),
  ``trial_details`` (every trial: state, params, measurement, constraints, failure reason).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from slotune.tuner.objectives import ObjectiveKind
from slotune.tuner.study import (
    CONFIG_ATTR,
    FORCED_ATTR,
    MEASUREMENT_ATTR,
    SOURCE_ATTR,
    StudySpec,
    is_feasible,
)

ROBUSTNESS_ATTR = "robustness"
PRESCREEN_ATTR = "prescreen"


def trial_params(t: FrozenTrial) -> dict[str, Any]:
    """The sampled parameters as the engine got them (stepped floats rounded)."""
    config = t.user_attrs.get(CONFIG_ATTR, {})
    forced = t.user_attrs.get(FORCED_ATTR) or {}
    return {**{k: config.get(k, v) for k, v in t.params.items()}, **forced}


def trial_detail(t: FrozenTrial) -> dict[str, Any]:
    m = t.user_attrs.get(MEASUREMENT_ATTR) or {}
    summary = m.get("summary") or {}
    return {
        "number": t.number,
        "state": t.state.name.lower(),
        "source": t.user_attrs.get(SOURCE_ATTR, "sampler"),
        "params": trial_params(t),
        "config": t.user_attrs.get(CONFIG_ATTR, {}),
        "values": _json_values(t.values),
        "feasible": t.state is TrialState.COMPLETE and is_feasible(t),
        "constraints": dict(t.constraints),
        "failure": m.get("failure"),
        "rate": m.get("rate"),
        "measurement": _brief(summary),
        "curve": m.get("curve", []),
        "engine": m.get("engine", {}),
        "duration_s": t.duration.total_seconds() if t.duration else None,
    }


def _json_values(values: Sequence[float] | None) -> list[float | None] | None:
    if values is None:
        return None
    return [v if math.isfinite(v) else None for v in values]


def _brief(summary: dict[str, Any]) -> dict[str, Any]:
    if not summary:
        return {}
    keys = (
        "request_throughput",
        "output_token_throughput",
        "goodput",
        "num_requests",
        "num_errors",
        "slos_met",
    )
    out = {k: summary.get(k) for k in keys}
    for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        d = summary.get(metric) or {}
        out[metric] = {"p50": d.get("p50"), "p99": d.get("p99"), "mean": d.get("mean")}
    out["slo_attainment"] = summary.get("slo_attainment", [])
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


def _importance(study: optuna.Study, done: list[FrozenTrial]) -> dict[str, float]:
    feasible = [t for t in done if is_feasible(t)]
    if len(feasible) < 3:
        return {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            imp = optuna.importance.get_param_importances(
                study, target=lambda t: t.values[0] if is_feasible(t) else 0.0
            )
    except (RuntimeError, ValueError):
        # Too few distinct values (e.g. every trial had one config) to fit the evaluator.
        return {}
    return {k: float(v) for k, v in imp.items()}


def _best_entry(best: FrozenTrial | None, robust: list[dict[str, Any]]) -> dict[str, Any] | None:
    robust_ok = [r for r in robust if r["feasible"]]
    if robust:
        if not robust_ok:
            return None
        r = max(robust_ok, key=lambda r: r["worst_value"])
        return {
            "number": r["number"],
            "params": r["params"],
            "config": r["config"],
            "value": r["worst_value"],
            "values_by_seed": r["values_by_seed"],
            "robust": True,
        }
    if best is None:
        return None
    return {
        "number": best.number,
        "params": trial_params(best),
        "config": best.user_attrs.get(CONFIG_ATTR, {}),
        "value": best.values[0],
        "robust": False,
    }


def study_report(study: optuna.Study, spec: StudySpec, *, details: bool = True) -> dict[str, Any]:
    """Summarise a study (see the module docstring for the keys)."""
    trials = study.get_trials(deepcopy=False)
    done = [t for t in trials if t.state is TrialState.COMPLETE]
    default = next((t for t in done if t.user_attrs.get(SOURCE_ATTR) == "default"), None)
    robust = list(study.user_attrs.get(ROBUSTNESS_ATTR, []))
    best = _best_entry(_best_trial(done), robust)
    default_entry = None
    if default is not None:
        default_entry = {
            "number": default.number,
            "params": trial_params(default),
            "config": default.user_attrs.get(CONFIG_ATTR, {}),
            "value": (_json_values(default.values) or [None])[0],
            "feasible": is_feasible(default),
            "failure": (default.user_attrs.get(MEASUREMENT_ATTR) or {}).get("failure"),
        }
    gain, note = _gain(best, default_entry)
    kind = spec.kind
    out: dict[str, Any] = {
        "name": spec.name,
        "backend": spec.backend,
        "engine": spec.engine,
        "model": spec.model,
        "gpu": spec.gpu,
        "workload": spec.workload_name,
        "slos": list(spec.slos),
        "objective": spec.objective,
        "value_names": kind.value_names,
        "target_trials": spec.trials,
        "trials": len(done),
        "feasible": sum(is_feasible(t) for t in done),
        "failed": sum(
            bool((t.user_attrs.get(MEASUREMENT_ATTR) or {}).get("failure")) for t in done
        ),
        "running": sum(t.state is TrialState.RUNNING for t in trials),
        "best": best,
        "default": default_entry,
        "gain": gain,
        "gain_note": note,
        "robustness": robust,
        "prescreen": study.user_attrs.get(PRESCREEN_ATTR),
        "importance": _importance(study, done),
    }
    if kind is ObjectiveKind.PARETO:
        out["pareto_front"] = [
            {"number": t.number, "params": trial_params(t), "values": list(t.values)}
            for t in _pareto_front(done)
        ]
    if details:
        out["trial_details"] = [trial_detail(t) for t in trials]
    return out


def _gain(
    best: dict[str, Any] | None, default: dict[str, Any] | None
) -> tuple[float | None, str | None]:
    if best is None:
        return None, "no configuration met every SLO"
    if default is None:
        return None, "the default configuration has not been measured yet"
    if not default["feasible"] or not default["value"]:
        why = default.get("failure") or "it broke an SLO"
        return None, f"the default configuration is infeasible ({why})"
    return best["value"] / default["value"], None
