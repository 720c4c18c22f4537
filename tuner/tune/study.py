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
import fcntl
import functools
import hashlib
import json
import math
import multiprocessing
import re
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from slotune.collector.errors import ConfigError
from slotune.collector.slo import parse_slos
from slotune.collector.vocabulary import BackendKind
from slotune.collector.workload import Trace, resolve_workload, retime
from slotune.tuner.sim.catalog import load_catalog_file
from slotune.tuner.sim.config import Engine
from slotune.tuner.tune.backends import make_backend
from slotune.tuner.tune.backends.launch import default_command, render_command
from slotune.tuner.tune.backends.startup import DEFAULT_STARTUP_TIMEOUT_S
from slotune.tuner.tune.export import context_length_for
from slotune.tuner.tune.gpu_slots import GpuSlot, acquire_slot
from slotune.tuner.tune.objectives import Measurement, ObjectiveKind
from slotune.tuner.tune.sampler import SamplerKind, make_sampler
from slotune.tuner.tune.space import (
    SearchSpace,
    canonical_overrides,
    check_overrides,
    default_space,
    engine_defaults,
)
from slotune.tuner.tune.trial import TrialRunner, WorkloadPlan

SPEC_ATTR = "slotune_spec"
CONFIG_ATTR = "config"
MEASUREMENT_ATTR = "measurement"
SOURCE_ATTR = "source"
FORCED_ATTR = "forced_params"
DEFAULT_HEARTBEAT_S = 10
# When the default and the trials after it all fail to start for one reason, no other
# configuration of the space will start either (weights that do not fit, a bad command): stop.
LAUNCH_STOP_TRIALS = 3


@dataclass(frozen=True, slots=True)
class StudySpec:
    """What a study measures; stored with the study so it can be resumed or joined.

    Attributes:
        name: the study name (unique in the database).
        backend: where trials run (simulator, launched engine, running endpoint).
        engine: whose parameters are searched.
        model, gpu: catalog names (``llama-3.1-8b``, ``h100-sxm``).
        workload: a named workload, or None with ``trace_file``.
        trace_file: a trace file path, or None with ``workload``.
        slos: SLO shorthands.
        objective: what a trial maximises.
        trials: completed trials the study aims at (trial 0 = the engine default).
        rate: offered rate (req/s); None = the trace's own timestamps.
        num_requests: measured requests per run, the first N of the trace (None: all).
        command: launch-backend command template (None: the real engine's, from its adapter).
        endpoint: attach-backend base URL.
        speedup: the emulated GPU runs this many times faster than real time (launch backend).
        space: search-space overrides (YAML file / ``--param`` forms, merged), by canonical name.
        seed: sampler and arrival seed.
        sampler: the sampler (see :func:`tuner.tune.sampler.make_sampler`).
        heartbeat_s: worker heartbeat; a trial is stale after 3 missed beats.
        recheck_k: re-measure the best K configurations with other seeds at the end (0: off);
            kept with the study so ``resume`` re-checks as the study was started.
        startup_timeout_s: launch backend: how long an engine may take to become healthy
            (a first vLLM start compiles for many minutes).
        catalog: catalog files every worker loads before its trials (the overlay of
            ``tune --calibrate-from``), so the simulator runs calibrated, also on resume.
    """

    name: str
    backend: BackendKind
    engine: Engine
    model: str
    gpu: str
    workload: str | None
    trace_file: str | None
    slos: tuple[str, ...]
    objective: ObjectiveKind = ObjectiveKind.CAPACITY
    trials: int = 30
    rate: float | None = None
    num_requests: int | None = None
    command: str | None = None
    endpoint: str | None = None
    speedup: float = 1.0
    space: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    sampler: SamplerKind = SamplerKind.TPE
    heartbeat_s: int = DEFAULT_HEARTBEAT_S
    recheck_k: int = 3
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    catalog: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> StudySpec:
        data = json.loads(text)
        # Studies stored before the emulated GPU's factor was named ``speedup``.
        if "time_scale" in data:
            data["speedup"] = data.pop("time_scale")
        data.pop("gpus_per_worker", None)  # now derived from the space
        known = {f.name for f in dataclasses.fields(cls)}
        spec = cls(**{k: v for k, v in data.items() if k in known})
        return dataclasses.replace(
            spec,
            backend=BackendKind(spec.backend),
            engine=Engine(spec.engine),
            objective=ObjectiveKind(spec.objective),
            sampler=SamplerKind(spec.sampler),
            slos=tuple(spec.slos),
            catalog=tuple(spec.catalog),
        )

    @property
    def launch_command(self) -> str:
        """The launch backend's command template: ``command``, or the real engine's own
        (:func:`~tuner.tune.backends.launch.default_command`) when none was given."""
        return self.command or default_command(self.engine, self.model, self.gpu)

    @property
    def workload_name(self) -> str:
        return self.workload or str(self.trace_file)

    @property
    def gpus_per_worker(self) -> int:
        """GPUs one engine needs: its tensor-parallel size when the space fixes it."""
        tp = self.space.get("tensor_parallel_size")
        return tp if isinstance(tp, int) and not isinstance(tp, bool) and tp > 0 else 1

    def validate(self) -> None:
        """Check every field before anything is stored or run (raises ConfigError).

        Covers the options (counts, rate, SLOs, backend needs, command template) and the
        search space (every parameter known to the engine, every value of the right type,
        the default configuration accepted by the engine model), so a bad input is one clear
        line and never a failed trial.
        """
        if self.trials < 1:
            raise ConfigError("--trials must be at least 1 (trial 0 is the engine default)")
        if self.heartbeat_s < 1:
            raise ConfigError("--heartbeat must be at least 1 second")
        if self.recheck_k < 0:
            raise ConfigError("--recheck must be 0 (off) or more")
        if (self.workload is None) == (self.trace_file is None):
            raise ConfigError("give exactly one of --workload NAME or --trace FILE")
        if self.rate is not None and not (math.isfinite(self.rate) and self.rate > 0):
            raise ConfigError(f"--rate must be a finite number of requests/s > 0, got {self.rate}")
        if self.num_requests is not None and self.num_requests < 1:
            raise ConfigError(f"--num-requests must be at least 1, got {self.num_requests}")
        if not (math.isfinite(self.speedup) and self.speedup > 0):
            raise ConfigError(f"--speedup must be a finite number > 0, got {self.speedup}")
        if self.seed < 0:
            raise ConfigError(f"--seed must be 0 or more, got {self.seed}")
        if not self.slos:
            raise ConfigError("give at least one --slo, e.g. --slo 'ttft:p99<=500ms'")
        parse_slos(self.slos)
        if self.backend is BackendKind.LAUNCH:
            render_command(
                self.launch_command, model=self.model, gpu=self.gpu, port=0, engine_args=""
            )
        if not (math.isfinite(self.startup_timeout_s) and self.startup_timeout_s > 0):
            raise ConfigError(
                f"--startup-timeout must be a finite number of seconds > 0, "
                f"got {self.startup_timeout_s}"
            )
        if self.backend is BackendKind.ATTACH and not self.endpoint:
            raise ConfigError("--backend attach needs --endpoint http://host:port")
        if self.backend is BackendKind.ATTACH and self.space:
            raise ConfigError(
                f"--backend attach measures the server as it runs and cannot apply "
                f"{', '.join(sorted(self.space))}: start the server with those flags, or tune "
                "them with --backend launch"
            )


def load_plan(spec: StudySpec) -> WorkloadPlan:
    """The workload of a study, cut to ``num_requests``."""
    return WorkloadPlan(
        _trace(spec.workload, spec.trace_file, spec.num_requests),
        spec.rate,
        _trace(spec.workload, spec.trace_file, None),
    )


@functools.lru_cache(maxsize=8)
def _trace(workload: str | None, trace_file: str | None, num_requests: int | None) -> Trace:
    # Traces are immutable; reading a bundled one takes seconds, and a study needs it in
    # creation, every worker, the re-check and the prescreen.
    trace = resolve_workload(workload, trace_file)
    return retime(trace, num_requests=num_requests) if num_requests else trace


def build_space(spec: StudySpec, plan: WorkloadPlan) -> SearchSpace:
    """The default space of the engine, with the study's overrides checked and applied.

    Raises:
        ConfigError: an override names a parameter the engine lacks or has a wrong value.
    """
    # The engine must fit the longest request of the whole workload, not only of the sample
    # the trials replay: the exported configuration serves all of it.
    whole = plan.source or plan.trace
    longest = max((r.input_tokens + r.output_tokens for r in whole.requests), default=1)
    max_model_len = context_length_for(longest, spec.model)
    defaults = engine_defaults(spec.engine, spec.model, spec.gpu, max_model_len=max_model_len)
    overrides = canonical_overrides(spec.engine, spec.space)
    check_overrides(spec.engine, overrides, defaults)
    space = default_space(spec.engine, defaults, max_model_len=max_model_len)
    if spec.backend is BackendKind.ATTACH:
        # Nothing restarts the server, so no parameter can change between its trials.
        return dataclasses.replace(space, params=())
    return space.with_overrides(overrides)


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
    """Optuna storage on the store's database, with heartbeat and stale-trial retry.

    Connections are not pooled: Optuna opens a session per operation and a study's storage
    is never disposed, so a pool would leave connections open until garbage collection.
    """
    engine_kwargs: dict[str, Any] = {"poolclass": NullPool}
    if url.startswith("sqlite"):
        # Several worker processes write to one SQLite file: wait for the lock, not fail.
        engine_kwargs["connect_args"] = {"timeout": 60}
    # Optuna creates its tables when it opens a storage; two processes doing it at once on a
    # fresh SQLite file race ("table studies already exists"), so one does it at a time.
    with quiet_optuna(), _file_lock(_sqlite_sibling(url, "optuna-schema.lock")):
        return optuna.storages.RDBStorage(
            url,
            heartbeat_interval=heartbeat_s,
            grace_period=3 * heartbeat_s,
            heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
                max_retry=1
            ),
            engine_kwargs=engine_kwargs,
        )


def _sqlite_sibling(url: str, suffix: str) -> Path | None:
    """A file next to a SQLite database file (None for other databases and in-memory SQLite)."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    db = Path(str(parsed.database))
    return db.with_name(f"{db.name}.{suffix}")


@contextmanager
def _file_lock(path: Path | None, *, wait: bool = True) -> Iterator[bool]:
    """An exclusive ``flock`` on ``path`` for the block (nothing when ``path`` is None).

    Yields whether the lock is held (False only with ``wait=False`` when another process has
    it). The kernel releases it when the process dies.
    """
    if path is None:
        yield True
        return
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def is_study_running(url: str, name: str) -> bool | None:
    """Whether a process runs the study ``name`` now: it holds the study's lock on a SQLite
    store (None on other stores, which keep no lock)."""
    path = _sqlite_sibling(url, f"study-{_lock_digest(name)}.lock")
    if path is None:
        return None
    if not path.exists():
        return False
    with _file_lock(path, wait=False) as free:
        return not free


def _lock_digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


@contextmanager
def study_lock(url: str, spec: StudySpec, workers: int) -> Iterator[None]:
    """Run a study's workers alone on a SQLite store.

    Concurrent workers on one SQLite study were seen to run more trials than the target,
    repeat configurations and fail to record trials; PostgreSQL handles them. So on SQLite a
    second process running the same study, or ``--workers`` above 1, is refused.

    Raises:
        ConfigError: naming PostgreSQL as the store for several workers.
    """
    path = _sqlite_sibling(url, f"study-{_lock_digest(spec.name)}.lock")
    fix = "use PostgreSQL (--db postgresql+psycopg://…) to run a study with several workers"
    if path is not None and workers > 1:
        raise ConfigError(f"--workers {workers} on a SQLite store: {fix}")
    with _file_lock(path, wait=False) as held:
        if not held:
            raise ConfigError(
                f"study {spec.name!r} is already being run by another process on this SQLite "
                f"store; wait for it to finish, or {fix}"
            )
        yield


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
            directions=spec.objective.directions,
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
    try:
        study = optuna.load_study(study_name=name, storage=open_storage(url))
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
    return make_sampler(
        spec.sampler,
        seed,
        space,
        multi_objective=len(spec.objective.directions) > 1,
        forced_attr=FORCED_ATTR,
    )


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
        with warnings.catch_warnings():
            # A trial retried after its worker died may already carry the constraints the
            # dead worker recorded for the same parameters; Optuna keeps those and warns.
            warnings.filterwarnings("ignore", message="The constraint value is ignored")
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
    for path in spec.catalog:
        load_catalog_file(path)
    plan = load_plan(spec)
    space = build_space(spec, plan)
    with gpu_slot(spec) as slot, quiet_optuna():
        runner = TrialRunner(
            make_backend(spec, slot), plan, tuple(parse_slos(spec.slos)), spec.objective
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
            check_launches(study)
            try:
                study.optimize(objective, n_trials=1, callbacks=callbacks)
            except KeyboardInterrupt:
                _requeue_interrupted(study, current)
                raise


def check_launches(study: optuna.Study) -> None:
    """Stop a study whose first trials all failed to start with the same error.

    Raises:
        ConfigError: the engine's reason and what to change; nothing else would start either.
    """
    done = sorted(
        (t for t in study.get_trials(deepcopy=False) if t.state is TrialState.COMPLETE),
        key=lambda t: t.number,
    )[:LAUNCH_STOP_TRIALS]
    reasons = [
        Measurement.from_attrs(t.user_attrs.get(MEASUREMENT_ATTR) or {}).failure for t in done
    ]
    if len(reasons) < LAUNCH_STOP_TRIALS or not all(reasons):
        return
    # The log path differs per trial and numbers may follow the parameters; the error is the
    # same when the rest is.
    shapes = {re.sub(r"\d+(\.\d+)?", "#", _LOG_NOTE.sub("", str(r))) for r in reasons}
    if len(shapes) == 1:
        raise ConfigError(
            f"stopped: the engine failed to start in each of the first {LAUNCH_STOP_TRIALS} "
            f"trials (the default included) with the same error: {reasons[-1]} -- fix that "
            "(e.g. --param tensor_parallel_size=N, another --gpu, or the --command) and start "
            "a new study"
        )


_LOG_NOTE = re.compile(r"\s*\(log: [^)]*\)")


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
def gpu_slot(spec: StudySpec) -> Iterator[GpuSlot | None]:
    if spec.backend is not BackendKind.LAUNCH:
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
            check_launches(study)
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
    return [s.study_name for s in optuna.get_all_study_summaries(open_storage(url))]
