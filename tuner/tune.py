"""``slotune tune`` end to end: create or resume a study, run it, re-check, report, store.

The store row (``tuning_study``) tracks status and the final report; the trials themselves
are Optuna's, in the same database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotune.collector.errors import ConfigError
from slotune.collector.slo import parse_slos
from slotune.collector.store import (
    StudyInfo,
    StudyStatus,
    default_db_url,
    get_study,
    list_studies,
    open_store,
    save_study,
)
from slotune.tuner.backends import make_backend
from slotune.tuner.export import export_config
from slotune.tuner.objectives import ObjectiveKind
from slotune.tuner.prescreen import (
    prescreen_spec,
    record_savings,
    run_prescreen,
    seed_study,
    trials_to_reach,
)
from slotune.tuner.report import study_report
from slotune.tuner.robustness import recheck
from slotune.tuner.space import load_space_file, parse_param_override
from slotune.tuner.study import (
    ProgressFn,
    StudySpec,
    _gpu_slot,
    create,
    load,
    load_plan,
    load_spec,
    run_workers,
)
from slotune.tuner.trial import TrialRunner


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to run a study (not stored with it).

    Attributes:
        workers: local worker processes.
        prescreen_k: seed the study with the best k configurations of a simulated study
            first (0: no prescreen).
        recheck_k: re-measure the best k configurations with other seeds (0: skip).
        recheck_seeds: re-runs per re-checked configuration.
        prescreen_trials: trials of the simulated study (None: 4x the real one, >= 40).
    """

    workers: int = 1
    prescreen_k: int = 0
    prescreen_trials: int | None = None
    recheck_k: int = 3
    recheck_seeds: int = 2


def resolve_url(url: str | None) -> str:
    """The database URL, creating/upgrading the default store (the store checks the schema)."""
    open_store(url).dispose()
    return url or default_db_url()


def tune(
    spec: StudySpec,
    url: str | None,
    options: RunOptions = RunOptions(),
    progress: ProgressFn | None = None,
    phase: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Create a study, run it to ``spec.trials`` completed trials, re-check and report.

    Args:
        spec: what to tune.
        url: database URL (None: the default SQLite store).
        options: workers, prescreen and re-check settings.
        progress: called as trials complete.
        phase: called with a short description when a new phase starts.

    Returns:
        The study report (:mod:`tuner.report`).
    """
    spec.validate()
    db = resolve_url(url)
    store = open_store(url)
    try:
        if get_study(store, spec.name) is not None:
            raise ConfigError(
                f"a study named {spec.name!r} already exists; resume it with "
                f"`slotune tune resume {spec.name}` or pick another --study"
            )
        seeds: list[dict[str, Any]] = []
        sim_reach = None
        if options.prescreen_k > 0:
            _say(phase, f"prescreen: simulated study {spec.name}-prescreen")
            seeds = run_prescreen(
                spec,
                db,
                options.prescreen_k,
                trials=options.prescreen_trials,
                workers=options.workers,
                progress=progress,
            )
            sim_reach = trials_to_reach(load(prescreen_spec(spec), db).get_trials())
        study = create(spec, db)
        if options.prescreen_k > 0:
            seed_study(study, spec, seeds, f"{spec.name}-prescreen", sim_reach)
        save_study(store, _info(spec, StudyStatus.RUNNING))
        return _run(spec, db, store, options, progress, phase)
    finally:
        store.dispose()


def resume(
    name: str,
    url: str | None,
    options: RunOptions = RunOptions(),
    progress: ProgressFn | None = None,
    phase: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Continue a study (after a kill, or with more workers) up to its trial target."""
    db = resolve_url(url)
    spec = load_spec(name, db)
    store = open_store(url)
    try:
        save_study(store, _info(spec, StudyStatus.RUNNING))
        return _run(spec, db, store, options, progress, phase)
    finally:
        store.dispose()


def _run(
    spec: StudySpec,
    db: str,
    store: Any,
    options: RunOptions,
    progress: ProgressFn | None,
    phase: Callable[[str], None] | None,
) -> dict[str, Any]:
    _say(phase, f"study {spec.name}: {spec.trials} trials on the {spec.backend} backend")
    try:
        run_workers(spec, db, options.workers, progress)
    except BaseException:
        save_study(store, _info(spec, StudyStatus.STOPPED))
        raise
    study = load(spec, db)
    if (
        options.recheck_k > 0
        and spec.kind is not ObjectiveKind.PARETO
        and study_report(study, spec, details=False)["feasible"]
    ):
        _say(
            phase,
            f"re-checking the best {options.recheck_k} configurations with "
            f"{options.recheck_seeds} other seeds",
        )
        plan = load_plan(spec)
        with _gpu_slot(spec) as slot:
            runner = TrialRunner(
                make_backend(spec, slot), plan, tuple(parse_slos(spec.slos)), spec.kind
            )
            recheck(study, runner, top_k=options.recheck_k, num_seeds=options.recheck_seeds)
    record_savings(study)
    report = study_report(study, spec)
    result = {k: v for k, v in report.items() if k != "trial_details"}
    save_study(store, _info(spec, StudyStatus.COMPLETE, result))
    return report


def show(name: str, url: str | None) -> dict[str, Any]:
    """The report of a stored study."""
    db = resolve_url(url)
    spec = load_spec(name, db)
    return study_report(load(spec, db), spec)


def export(name: str, url: str | None, fmt: str) -> str:
    """The best configuration of a study as a launch command / YAML."""
    report = show(name, url)
    best = report["best"]
    if best is None:
        raise ConfigError(
            f"study {name!r} has no configuration that met every SLO; "
            "relax the SLOs or run more trials before exporting"
        )
    return export_config(
        best["config"], engine=report["engine"], model=report["model"], gpu=report["gpu"], fmt=fmt
    )


def list_all(url: str | None) -> list[dict[str, Any]]:
    """Every stored study, newest first, with its status and headline result."""
    store = open_store(url)
    try:
        out = []
        for info in list_studies(store):
            result = dict(info.result)
            out.append(
                {
                    "name": info.name,
                    "status": str(info.status),
                    "backend": info.backend,
                    "engine": info.engine,
                    "model": info.model,
                    "gpu": info.gpu,
                    "workload": info.workload,
                    "objective": info.objective,
                    "slos": list(info.slos),
                    "trials": result.get("trials"),
                    "best_value": (result.get("best") or {}).get("value"),
                    "gain": result.get("gain"),
                    "created_at": info.created_at,
                }
            )
        return out
    finally:
        store.dispose()


def _info(spec: StudySpec, status: StudyStatus, result: dict[str, Any] | None = None) -> StudyInfo:
    return StudyInfo(
        name=spec.name,
        optuna_study_name=spec.name,
        backend=spec.backend,
        engine=spec.engine,
        model=spec.model,
        gpu=spec.gpu,
        workload=spec.workload_name,
        objective=spec.objective,
        slos=spec.slos,
        status=status,
        result=result or {},
    )


def _say(phase: Callable[[str], None] | None, text: str) -> None:
    if phase:
        phase(text)


def spec_from_options(
    *,
    name: str | None,
    backend: str,
    engine: str,
    model: str,
    gpu: str,
    workload: str | None,
    trace_file: str | None,
    slos: list[str],
    objective: str,
    trials: int,
    rate: float | None,
    num_requests: int | None,
    command: str | None,
    endpoint: str | None,
    time_scale: float,
    space_file: str | None,
    params: list[str],
    seed: int,
    sampler: str,
    prescreen: str | None,
    heartbeat_s: int = 10,
) -> StudySpec:
    """Build and validate a study spec from command-line options."""
    if prescreen not in (None, "sim"):
        raise ConfigError(f"--prescreen {prescreen!r}: the only prescreen is 'sim'")
    if (workload is None) == (trace_file is None):
        raise ConfigError("give exactly one of --workload NAME or --trace FILE")
    overrides: dict[str, Any] = load_space_file(space_file) if space_file else {}
    overrides.update(parse_param_override(p) for p in params)
    tp = overrides.get("tensor_parallel_size")
    spec = StudySpec(
        name=name or f"{engine}-{model}-{gpu}-{time.strftime('%Y%m%d-%H%M%S')}",
        backend=backend,
        engine=engine,
        model=model,
        gpu=gpu,
        workload=workload,
        trace_file=str(Path(trace_file).resolve()) if trace_file else None,
        slos=tuple(slos),
        objective=objective,
        trials=trials,
        rate=rate,
        num_requests=num_requests,
        command=command,
        endpoint=endpoint,
        time_scale=time_scale,
        space=overrides,
        seed=seed,
        sampler=sampler,
        heartbeat_s=heartbeat_s,
        gpus_per_worker=tp if isinstance(tp, int) else 1,
    )
    spec.validate()
    return spec
