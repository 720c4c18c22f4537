"""Named, resumable tuning studies stored in slotune's own database.

The trials live in Optuna's tables (``RDBStorage``) in the same database as the store — a
SQLite file or PostgreSQL. A study is named; its :class:`StudySpec` is kept as a study user
attribute, so ``resume NAME`` rebuilds everything (workload, SLOs, space, backend) from the
database alone, and workers on other machines join with nothing but the name and the URL.

Fault tolerance: every worker runs a heartbeat; a trial whose worker died (killed process,
lost machine) goes stale after ``grace_period`` and is failed and re-enqueued once with the
same parameters (``RetryHeartbeatStaleTrialCallback``), so a study killed mid-trial and
resumed ends with exactly ``trials`` completed trials and none left RUNNING.

GPUs: a launch-backend worker holds an exclusive lock file on its GPU (or GPU group) for its
whole life and starts engines with ``CUDA_VISIBLE_DEVICES`` set to it, so two workers never
share a GPU, whether they come from one ``--workers N`` or from separate commands.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import multiprocessing
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from slotune.collector.errors import ConfigError
from slotune.collector.slo import parse_slos
from slotune.collector.workload import Trace, resolve_workload, retime
from slotune.tuner.backends import make_backend
from slotune.tuner.gpu_slots import GpuSlot, acquire_slot
from slotune.tuner.objectives import ObjectiveKind
from slotune.tuner.sampler import DistinctTPESampler
from slotune.tuner.space import SearchSpace, default_space, engine_defaults
from slotune.tuner.trial import TrialRunner, WorkloadPlan

SPEC_ATTR = "slotune_spec"
CONFIG_ATTR = "config"
MEASUREMENT_ATTR = "measurement"
SOURCE_ATTR = "source"
FORCED_ATTR = "forced_params"
DEFAULT_HEARTBEAT_S = 10


@dataclass(frozen=True, slots=True)
class StudySpec:
    """What a study measures; stored with the study so it can be resumed or joined.

    Attributes:
        name: the study name (unique in the database).
        backend: ``sim``, ``launch`` or ``attach``.
        engine: ``vllm`` or ``trtllm``.
        model, gpu: catalog names (``llama-3.1-8b``, ``h100-sxm``).
        workload: a named workload, or None with ``trace_file``.
        trace_file: a trace file path, or None with ``workload``.
        slos: SLO shorthands.
        objective: ``capacity``, ``goodput``, ``throughput`` or ``pareto``.
        trials: completed trials the study aims at (trial 0 = the engine default).
        rate: offered rate (req/s); None = the trace's own timestamps.
        num_requests: first N requests of the trace.
        command: launch-backend command template.
        endpoint: attach-backend base URL.
        time_scale: emulated-engine speed-up (launch backend).
        space: search-space overrides (YAML file / ``--param`` forms, merged).
        seed: sampler and arrival seed.
        sampler: ``tpe``, ``optuna-tpe``, ``gp`` or ``random`` (see :func:`make_sampler`).
        heartbeat_s: worker heartbeat; a trial is stale after 3 missed beats.
        gpus_per_worker: GPUs one engine needs (its tensor-parallel size).
    """

    name: str
    backend: str
    engine: str
    model: str
    gpu: str
    workload: str | None
    trace_file: str | None
    slos: tuple[str, ...]
    objective: str = ObjectiveKind.CAPACITY.value
    trials: int = 30
    rate: float | None = None
    num_requests: int | None = None
    command: str | None = None
    endpoint: str | None = None
    time_scale: float = 1.0
    space: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    sampler: str = "tpe"
    heartbeat_s: int = DEFAULT_HEARTBEAT_S
    gpus_per_worker: int = 1

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> StudySpec:
        data = json.loads(text)
        data["slos"] = tuple(data["slos"])
        return cls(**data)

    @property
    def kind(self) -> ObjectiveKind:
        return ObjectiveKind(self.objective)

    @property
    def workload_name(self) -> str:
        return self.workload or str(self.trace_file)

    def validate(self) -> None:
        """Check the fields a study cannot start without (raises ConfigError)."""
        if self.trials < 1:
            raise ConfigError("--trials must be at least 1 (trial 0 is the engine default)")
        if self.heartbeat_s < 1:
            raise ConfigError("--heartbeat must be at least 1 second")
        try:
            ObjectiveKind(self.objective)
        except ValueError as e:
            raise ConfigError(
                f"--objective {self.objective!r}: use capacity, goodput, throughput or pareto"
            ) from e
        if not self.slos:
            raise ConfigError("give at least one --slo, e.g. --slo 'ttft:p99<=500ms'")
        parse_slos(self.slos)
        if self.backend == "launch" and not self.command:
            raise ConfigError(
                "--backend launch needs --command, e.g. "
                "'vllm serve {model} --port {port} {engine_args}'"
            )
        if self.backend == "attach" and not self.endpoint:
            raise ConfigError("--backend attach needs --endpoint http://host:port")


def load_plan(spec: StudySpec) -> WorkloadPlan:
    """The workload of a study, cut to ``num_requests``."""
    return WorkloadPlan(_trace(spec.workload, spec.trace_file, spec.num_requests), spec.rate)


@functools.lru_cache(maxsize=8)
def _trace(workload: str | None, trace_file: str | None, num_requests: int | None) -> Trace:
    # Traces are immutable; reading a bundled one takes seconds, and a study needs it in
    # creation, every worker, the re-check and the prescreen.
    trace = resolve_workload(workload, trace_file)
    return retime(trace, num_requests=num_requests) if num_requests else trace


def build_space(spec: StudySpec, plan: WorkloadPlan) -> SearchSpace:
    """The default space of the engine, with the study's overrides applied."""
    longest = max((r.input_tokens + r.output_tokens for r in plan.trace.requests), default=1)
    # The engine must fit the longest request; a power of two as an operator would set it.
    max_model_len = max(2048, 1 << (longest - 1).bit_length())
    defaults = engine_defaults(spec.engine, spec.model, spec.gpu, max_model_len=max_model_len)
    space = default_space(spec.engine, defaults, max_model_len=max_model_len)
    return space.with_overrides(spec.space)


@contextmanager
def quiet_optuna() -> Iterator[None]:
    """Silence Optuna's per-trial log lines and its "experimental feature" warnings
    (heartbeats and stale-trial retry are marked experimental but are what we rely on)."""
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(level)


def open_storage(url: str, heartbeat_s: int = DEFAULT_HEARTBEAT_S) -> optuna.storages.RDBStorage:
    """Optuna storage on the store's database, with heartbeat and stale-trial retry."""
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        # Several worker processes write to one SQLite file: wait for the lock, not fail.
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60}}
    with quiet_optuna():
        return optuna.storages.RDBStorage(
            url,
            heartbeat_interval=heartbeat_s,
            grace_period=3 * heartbeat_s,
            heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
                max_retry=1
            ),
            **kwargs,
        )


def make_sampler(
    name: str, seed: int | None, space: SearchSpace, *, multi_objective: bool = False
) -> optuna.samplers.BaseSampler:
    """The sampler of a study (choice justified by ``benchmarks/tuner_efficiency.py``).

    ``tpe`` is slotune's :class:`~tuner.sampler.DistinctTPESampler` (Optuna's multivariate
    TPE for the two-objective ``pareto``); ``optuna-tpe`` is Optuna's TPE as it is.
    """
    if name == "tpe" and not multi_objective:
        return DistinctTPESampler(space, seed=seed, forced_attr=FORCED_ATTR)
    if name in ("tpe", "optuna-tpe"):
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=5)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=5)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ConfigError(f"sampler {name!r}: use tpe, optuna-tpe, gp or random")


def create(spec: StudySpec, url: str) -> optuna.Study:
    """Create a new named study, with the engine default enqueued as trial 0."""
    spec.validate()
    storage = open_storage(url, spec.heartbeat_s)
    if spec.name in {s.study_name for s in optuna.get_all_study_summaries(storage)}:
        raise ConfigError(
            f"a study named {spec.name!r} already exists; resume it with "
            f"`slotune tune resume {spec.name}` or pick another --study name"
        )
    space = build_space(spec, load_plan(spec))
    with quiet_optuna():
        study = optuna.create_study(
            storage=storage,
            study_name=spec.name,
            directions=spec.kind.directions,
            sampler=_sampler_of(spec, spec.seed, space),
        )
    study.set_user_attr(SPEC_ATTR, spec.to_json())
    study.enqueue_trial(
        space.default_params(),
        user_attrs={SOURCE_ATTR: "default", FORCED_ATTR: space.forced_defaults()},
    )
    return study


def load_spec(name: str, url: str) -> StudySpec:
    """The spec of a stored study (ConfigError when there is no such study)."""
    storage = optuna.storages.RDBStorage(url)
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError as e:
        raise ConfigError(
            f"no study named {name!r} in this database; `slotune tune list` shows the stored ones"
        ) from e
    text = study.user_attrs.get(SPEC_ATTR)
    if not isinstance(text, str):
        raise ConfigError(
            f"study {name!r} was not created by slotune tune; it has no slotune spec to resume from"
        )
    return StudySpec.from_json(text)


def load(spec: StudySpec, url: str, *, sampler_seed: int | None = None) -> optuna.Study:
    return optuna.load_study(
        study_name=spec.name,
        storage=open_storage(url, spec.heartbeat_s),
        sampler=_sampler_of(spec, sampler_seed, build_space(spec, load_plan(spec))),
    )


def _sampler_of(
    spec: StudySpec, seed: int | None, space: SearchSpace
) -> optuna.samplers.BaseSampler:
    return make_sampler(spec.sampler, seed, space, multi_objective=len(spec.kind.directions) > 1)


def count_states(study: optuna.Study) -> dict[TrialState, int]:
    out = dict.fromkeys(TrialState, 0)
    for t in study.get_trials(deepcopy=False):
        out[t.state] += 1
    return out


def objective_fn(
    runner: TrialRunner, space: SearchSpace, seed: int, current: list[int] | None = None
) -> Callable[[optuna.Trial], tuple[float, ...]]:
    """The Optuna objective of a study: sample, measure, record constraints and details.

    ``current`` (optional) receives the number of the trial being run.
    """

    def objective(trial: optuna.Trial) -> tuple[float, ...]:
        if current is not None:
            current[:] = [trial.number]
        config = space.suggest(trial, trial.user_attrs.get(FORCED_ATTR))
        trial.set_user_attr(CONFIG_ATTR, config)
        m = runner.measure(config, seed)
        for key, value in m.constraints.items():
            trial.set_constraint(key, value)
        trial.set_user_attr(MEASUREMENT_ATTR, m.to_attrs())
        return m.values

    return objective


def work(
    spec: StudySpec,
    url: str,
    *,
    worker_index: int = 0,
    on_trial: Callable[[optuna.Study, optuna.trial.FrozenTrial], None] | None = None,
) -> None:
    """Run trials of a study until it has ``spec.trials`` completed ones.

    Args:
        spec: the study.
        url: database URL.
        worker_index: distinguishes the sampler seeds of concurrent workers.
        on_trial: called after every trial this worker finishes.
    """
    plan = load_plan(spec)
    space = build_space(spec, plan)
    with _gpu_slot(spec) as slot, quiet_optuna():
        runner = TrialRunner(
            make_backend(spec, slot), plan, tuple(parse_slos(spec.slos)), spec.kind
        )
        study = load(spec, url, sampler_seed=spec.seed + 1000 * worker_index)
        current: list[int] = []
        objective = objective_fn(runner, space, spec.seed, current)
        callbacks = [on_trial] if on_trial else None
        while True:
            optuna.storages.fail_stale_trials(study)
            n = count_states(study)
            done, running, waiting = (
                n[TrialState.COMPLETE],
                n[TrialState.RUNNING],
                n[TrialState.WAITING],
            )
            if done >= spec.trials:
                return
            if done + running >= spec.trials and waiting == 0:
                # The last trials run elsewhere; wait for them, or for their heartbeat to
                # stop (then they are failed, re-enqueued, and this worker takes them).
                time.sleep(min(spec.heartbeat_s, 2))
                continue
            try:
                study.optimize(objective, n_trials=1, callbacks=callbacks)
            except KeyboardInterrupt:
                _requeue_interrupted(study, current)
                raise


def _requeue_interrupted(study: optuna.Study, current: list[int]) -> None:
    """Put an interrupted trial's parameters back in the queue, so ``resume`` runs it again
    (Optuna marks it FAIL; only heartbeat-stale trials are retried on their own)."""
    if not current:
        return
    trial = study.get_trials(deepcopy=False)[current[0]]
    if trial.state is TrialState.FAIL:
        study.enqueue_trial(
            dict(trial.params),
            user_attrs={
                SOURCE_ATTR: trial.user_attrs.get(SOURCE_ATTR, "sampler"),
                FORCED_ATTR: trial.user_attrs.get(FORCED_ATTR, {}),
                "requeued_from": trial.number,
            },
        )


@contextmanager
def _gpu_slot(spec: StudySpec) -> Iterator[GpuSlot | None]:
    if spec.backend != "launch":
        yield None
        return
    with acquire_slot(spec.gpus_per_worker) as slot:
        yield slot


def _worker_main(spec_json: str, url: str, worker_index: int) -> None:
    work(StudySpec.from_json(spec_json), url, worker_index=worker_index)


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a study stands (for progress bars)."""

    completed: int
    running: int
    target: int
    best_value: float | None


ProgressFn = Callable[[Progress], None]


def progress_of(study: optuna.Study, target: int) -> Progress:
    trials = study.get_trials(deepcopy=False)
    done = [t for t in trials if t.state is TrialState.COMPLETE]
    feasible = [t.values[0] for t in done if t.values and is_feasible(t)]
    return Progress(
        len(done),
        sum(t.state is TrialState.RUNNING for t in trials),
        target,
        max(feasible) if feasible else None,
    )


def is_feasible(trial: optuna.trial.FrozenTrial) -> bool:
    return all(v <= 0 for v in trial.constraints.values())


def run_workers(
    spec: StudySpec, url: str, workers: int = 1, progress: ProgressFn | None = None
) -> None:
    """Run a created study to its target with ``workers`` local processes.

    One worker runs in this process; more run as separate processes (each with its own
    sampler seed, heartbeat and GPU slot). Interrupting stops them all; their running
    trials go stale and are retried on ``resume``.
    """
    if workers < 1:
        raise ConfigError("--workers must be at least 1")

    def report(study: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
        if progress:
            progress(progress_of(study, spec.trials))

    if workers == 1:
        work(spec, url, on_trial=report)
        return
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_worker_main, args=(spec.to_json(), url, i), daemon=False)
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    study = load(spec, url)
    try:
        while any(p.is_alive() for p in procs):
            if progress:
                progress(progress_of(study, spec.trials))
            time.sleep(0.5)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join(timeout=10)
    if progress:
        progress(progress_of(study, spec.trials))
    bad = [p.exitcode for p in procs if p.exitcode]
    if bad:
        raise ConfigError(
            f"{len(bad)} of {workers} tuner workers exited with an error "
            f"(exit codes {bad}); run with --workers 1 to see the error"
        )


def study_names(url: str) -> list[str]:
    storage = optuna.storages.RDBStorage(url)
    return [s.study_name for s in optuna.get_all_study_summaries(storage)]
