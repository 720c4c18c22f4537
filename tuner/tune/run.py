"""Studies end to end: create or resume one, run it, re-check, report, store.

The store row (``tuning_study``) tracks status and the final report; the trials themselves
are Optuna's, in the same database.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
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
from slotune.collector.vocabulary import BackendKind
from slotune.tuner.sim.catalog import get_model
from slotune.tuner.tune.backends import make_backend
from slotune.tuner.tune.backends.launch import render_command
from slotune.tuner.tune.export import export_config, model_in_argv
from slotune.tuner.tune.objectives import ObjectiveKind
from slotune.tuner.tune.prescreen import (
    prescreen_spec,
    record_savings,
    run_prescreen,
    seed_study,
    trials_to_reach,
)
from slotune.tuner.tune.repeats import repeat_for_gain
from slotune.tuner.tune.report import StudyListing, StudyReport, study_report
from slotune.tuner.tune.robustness import recheck
from slotune.tuner.tune.study import (
    ProgressFn,
    StudySpec,
    build_space,
    create,
    gpu_slot,
    is_study_running,
    load,
    load_plan,
    load_spec,
    progress_of,
    run_workers,
    study_lock,
)
from slotune.tuner.tune.trial import TrialRunner


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to run a study (not stored with it).

    Attributes:
        workers: local worker processes.
        prescreen_k: seed the study with the best k configurations of a simulated study
            first (0: no prescreen).
        recheck_seeds: re-runs per re-checked configuration (how many is the spec's).
        prescreen_trials: trials of the simulated study (None: 4x the real one, >= 40).
    """

    workers: int = 1
    prescreen_k: int = 0
    prescreen_trials: int | None = None
    recheck_seeds: int = 2

    def validate(self) -> None:
        """Raises ConfigError on a value no run can use."""
        if self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}")
        if self.prescreen_k < 0:
            raise ConfigError(f"--prescreen-k must be 0 or more, got {self.prescreen_k}")
        if self.recheck_seeds < 1:
            raise ConfigError(f"re-check seeds must be at least 1, got {self.recheck_seeds}")


def resolve_url(url: str | None) -> str:
    """The database URL, creating/upgrading the default store (the store checks the schema)."""
    open_store(url).dispose()
    return url or default_db_url()


def check_study(spec: StudySpec, options: RunOptions = RunOptions()) -> None:
    """Check everything a study needs before anything is stored or run.

    Raises:
        ConfigError: one line naming the option and the fix (a bad ``--param`` included).
    """
    spec.validate()
    options.validate()
    if spec.backend is BackendKind.ATTACH and options.prescreen_k > 0:
        raise ConfigError(
            "--prescreen-k seeds the study with simulated configurations, which --backend "
            "attach cannot apply to a running server; leave --prescreen-k at 0"
        )
    build_space(spec, load_plan(spec))


def tune_study(
    spec: StudySpec,
    url: str | None,
    options: RunOptions = RunOptions(),
    progress: ProgressFn | None = None,
    phase: Callable[[str], None] | None = None,
) -> StudyReport:
    """Create a study, run it to ``spec.trials`` completed trials, re-check and report.

    Args:
        spec: what to tune.
        url: database URL (None: the default SQLite store).
        options: workers, prescreen and re-check settings.
        progress: called as trials complete.
        phase: called with a short description when a new phase starts.

    Returns:
        The study report.
    """
    check_study(spec, options)
    db = resolve_url(url)
    with study_lock(db, spec, options.workers):
        return _create_and_run(spec, db, url, options, progress, phase)


def _create_and_run(
    spec: StudySpec,
    db: str,
    url: str | None,
    options: RunOptions,
    progress: ProgressFn | None,
    phase: Callable[[str], None] | None,
) -> StudyReport:
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


def resume_study(
    name: str,
    url: str | None,
    options: RunOptions = RunOptions(),
    progress: ProgressFn | None = None,
    phase: Callable[[str], None] | None = None,
    *,
    recheck_k: int | None = None,
) -> StudyReport:
    """Continue a study (after a kill, or with more workers) up to its trial target.

    ``recheck_k`` None keeps the re-check the study was started with.
    """
    options.validate()
    db = resolve_url(url)
    spec = load_spec(name, db)
    if recheck_k is not None:
        spec = dataclasses.replace(spec, recheck_k=recheck_k)
        spec.validate()
    store = open_store(url)
    try:
        with study_lock(db, spec, options.workers):
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
) -> StudyReport:
    _say(phase, f"study {spec.name}: {spec.trials} trials on the {spec.backend} backend")
    try:
        run_workers(spec, db, options.workers, progress)
    except BaseException:
        save_study(store, _info(spec, StudyStatus.STOPPED))
        raise
    study = load(spec, db)
    # An attached server runs one configuration: its trials are already re-runs of it.
    if (
        spec.recheck_k > 0
        and spec.backend is not BackendKind.ATTACH
        and spec.objective is not ObjectiveKind.PARETO
        and study_report(study, spec, details=False).feasible
    ):
        _say(
            phase,
            f"re-checking the best {spec.recheck_k} configurations with "
            f"{options.recheck_seeds} other seeds",
        )
        plan = load_plan(spec)
        with gpu_slot(spec) as slot:
            runner = TrialRunner(
                make_backend(spec, slot), plan, tuple(parse_slos(spec.slos)), spec.objective
            )
            recheck(study, runner, top_k=spec.recheck_k, num_seeds=options.recheck_seeds)
            repeat_for_gain(study, runner)
    record_savings(study)
    report = study_report(study, spec)
    save_study(store, _info(spec, StudyStatus.COMPLETE, report.to_dict(details=False)))
    return report


def show_study(name: str, url: str | None) -> StudyReport:
    """The report of a stored study."""
    db = resolve_url(url)
    spec = load_spec(name, db)
    return study_report(load(spec, db), spec)


def export_study(name: str, url: str | None, fmt: str) -> str:
    """The best configuration of a study as a launch command / YAML, headed by ``#`` lines
    that name the engine and model it was measured on, and a warning when it was not
    measured better than the default beyond the spread between repeats.

    Raises:
        ConfigError: no configuration met every SLO, or the study attached to a running
            server (which changes no parameter, so there is nothing to recommend).
    """
    report = show_study(name, url)
    spec = load_spec(name, resolve_url(url))
    if spec.backend is BackendKind.ATTACH:
        raise ConfigError(
            f"study {name!r} measured a running server (--backend attach), which changes no "
            f"parameter: there is no configuration to export; `slotune tune show {name}` has "
            "what the server runs, and --backend launch tunes it"
        )
    if report.best is None:
        raise ConfigError(
            f"study {name!r} has no configuration that met every SLO; "
            "relax the SLOs or run more trials before exporting"
        )
    plan = load_plan(spec)
    # over the whole workload: the tuning sample may miss its longest requests
    whole = plan.source or plan.trace
    measured = measured_model(spec)
    return export_header(report, measured) + export_config(
        report.best.config,
        engine=report.engine,
        model=report.model,
        gpu=report.gpu,
        fmt=fmt,
        longest_tokens=max((r.input_tokens + r.output_tokens for r in whole.requests), default=0),
        served_model=measured,
    )


def measured_model(spec: StudySpec) -> str | None:
    """The model the launch backend's engines served, as its command named it (None: the
    catalog model's own, or another backend)."""
    if spec.backend is not BackendKind.LAUNCH:
        return None
    argv = render_command(
        spec.launch_command, model=spec.model, gpu=spec.gpu, port=0, engine_args=""
    )
    named = model_in_argv(argv)
    return None if named in (None, spec.model, get_model(spec.model).hf_name) else named


def export_header(report: StudyReport, measured: str | None) -> str:
    """``#`` lines: what the configuration was measured on, and whether it beat the default."""
    how = {
        BackendKind.SIM.value: "simulated",
        BackendKind.LAUNCH.value: "measured on launched engines",
    }.get(report.backend, f"measured ({report.backend})")
    served = measured or f"{report.model} (catalog)"
    lines = [
        f"# {how}: {report.engine} serving {served}, GPU {report.gpu}, trial "
        f"{report.best.number if report.best else '-'} of study {report.name}\n"
    ]
    if not _beats_default(report):
        lines.append(
            "# WARNING: not better than the default configuration beyond the spread between "
            f"repeats ({report.gain_note or 'no gain claimed'}); deploying it changes nothing "
            "measurable\n"
        )
    return "".join(lines)


def _beats_default(report: StudyReport) -> bool:
    if report.default is not None and not report.default.feasible:
        return True  # the default broke an SLO, the best held every one
    return report.gain is not None and report.gain > 1.0


def list_studies_report(url: str | None) -> list[StudyListing]:
    """Every stored study, newest first, with its status and headline result."""
    db = url or default_db_url()
    store = open_store(url)
    try:
        out = []
        for info in list_studies(store):
            result = dict(info.result)
            status = str(info.status)
            if info.status is StudyStatus.RUNNING:
                # The row says running until the study ends; a killed run never ends it.
                if is_study_running(db, info.name) is False:
                    status = StudyStatus.STOPPED.value
                result["trials"] = progress_of(load(load_spec(info.name, db), db), 0).completed
            out.append(
                StudyListing(
                    name=info.name,
                    status=status,
                    backend=info.backend,
                    engine=info.engine,
                    model=info.model,
                    gpu=info.gpu,
                    workload=info.workload,
                    objective=info.objective,
                    slos=tuple(info.slos),
                    trials=result.get("trials"),
                    best_value=(result.get("best") or {}).get("value"),
                    gain=result.get("gain"),
                    created_at=info.created_at,
                )
            )
        return out
    finally:
        store.dispose()


def _info(spec: StudySpec, status: StudyStatus, result: dict[str, Any] | None = None) -> StudyInfo:
    return StudyInfo(
        name=spec.name,
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
