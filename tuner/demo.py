"""``slotune demo``: every part of slotune on one machine, in about two minutes.

1. opens the store (the embedded SQLite file unless ``--db`` says otherwise);
2. starts an emulated vLLM engine (``slotune emulate --speedup``) and an agent scraping it
   into the store every second (``slotune agent``);
3. benchmarks the engine's default configuration on a real trace and stores the run;
4. runs a short tuning study through the ``launch`` backend: every trial starts its own
   emulated engine with the trial's flags, exactly as a GPU node would start ``vllm serve``,
   and measures its goodput under the SLOs at the same offered load (one run per trial, to
   stay short; ``slotune tune`` defaults to the capacity objective);
5. states the gain as capacity under the SLOs: the highest rate at which the default and the
   best configuration each meet every SLO on the simulator, each confirmed by one run at that
   rate on the emulated engine;
6. prints where it is stored and the ``slotune ui`` line that opens it.

Every process it starts lives in its own process group and is stopped on the way out, also on
Ctrl-C or SIGTERM.

The emulated engine runs in real time, so on a host short of CPU it falls behind and every
latency it serves grows (:mod:`tuner.emulate.lag`). The demo reads the engine's own lag
after each emulated measurement and says when one was not trustworthy: the benchmark and
each tuning trial get a line, and a confirmation run that was not is run again, up to
``CONFIRM_TRIES`` times, each retry saying why; a confirmation never trustworthy is reported
as such (``confirmed`` None, with the reason in ``note``), not as an SLO that broke.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from slotune.collector.bench import ArrivalSpec, BenchConfig, run_benchmark
from slotune.collector.slo import parse_slos
from slotune.collector.store import BenchRunMeta, default_db_url, open_store, save_bench_run
from slotune.collector.summary import summarize
from slotune.collector.vocabulary import Engine
from slotune.tuner.emulate.lag import LagReport
from slotune.tuner.emulate.lag_client import fetch_lag
from slotune.tuner.tune.backends import BackendKind, make_backend
from slotune.tuner.tune.backends.base import TrialFailed
from slotune.tuner.tune.backends.launch import EngineProcess, free_port, scale_record
from slotune.tuner.tune.backends.sim import SimBackend
from slotune.tuner.tune.objectives import Measurement, ObjectiveKind
from slotune.tuner.tune.report import StudyReport
from slotune.tuner.tune.run import RunOptions, tune_study
from slotune.tuner.tune.study import ProgressFn, StudySpec, load_plan
from slotune.tuner.tune.trial import TrialRunner, WorkloadPlan

# The demo shows vLLM: its space below and the emulated engine speak vLLM's names.
ENGINE = Engine.VLLM
MODEL = "llama-3.1-8b"
GPU = "h100-sxm"
WORKLOAD = "azure-conv"
SLOS = ("ttft:p99<=500ms", "itl:p99<=50ms")
# The two parameters that decide ITL under load on this workload (a large token budget lets
# long prefills stall every running decode); a handful of trials can cover them.
DEMO_SPACE = {
    "max_num_batched_tokens": [512, 1024, 2048, 4096, 8192],
    "max_num_seqs": [64, 256, 1024],
    "enable_chunked_prefill": None,
    "enable_prefix_caching": None,
    "gpu_memory_utilization": None,
    "long_prefill_token_threshold": None,
}
CONFIRM_TRIES = 3


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """Sizes of the demo (the defaults finish in about two minutes on two cores).

    Attributes:
        trials: tuning trials (trial 0 = vLLM's defaults).
        num_requests: requests per measurement.
        speedup: the emulated GPU runs this many times faster than real time. Client
            timing noise is multiplied by it too (a 5 ms scheduling hiccup reads as 20 ms of
            ITL at 4x, and enough such gaps break an ``itl:p99`` SLO, which counts every token
            gap), so it stays small enough for a busy two-core machine.
        rate: offered load (req/s, real-GPU time) of the benchmark and of every trial.
    """

    trials: int = 6
    num_requests: int = 40
    speedup: float = 2.0
    rate: float = 4.0


@dataclass(frozen=True, slots=True)
class Capacity:
    """One configuration's capacity under the SLOs.

    Attributes:
        label: ``default`` or ``best``.
        number: its trial in the study.
        config: the engine configuration.
        sim_rate: the highest rate (req/s) at which every SLO holds on the simulator (0: none).
        confirmed: whether every SLO held on the emulated engine at ``sim_rate`` (None: not
            run, the simulator found no such rate, or no run was trustworthy).
        slo_attainment: the emulated run's SLO attainment.
        note: why ``confirmed`` is None although a run was made (the engine's lag).
    """

    label: str
    number: int
    config: dict[str, Any]
    sim_rate: float
    confirmed: bool | None
    slo_attainment: list[dict[str, Any]]
    note: str = ""


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What the demo found and where it is stored."""

    study: str
    db: str
    report: StudyReport
    bench: dict[str, Any]
    capacities: list[Capacity]
    logs: str
    rate: float
    duration_s: float
    ui_command: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def slotune_argv() -> list[str]:
    """How to start this slotune's own command line in a subprocess."""
    exe = Path(sys.executable).parent / "slotune"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "slotune.ui.cli"]


@contextmanager
def _interrupt_on_signals() -> Iterator[None]:
    # SIGTERM and SIGINT both become KeyboardInterrupt, so one clean-up path runs; SIGINT is
    # set explicitly because a shell starts background jobs with it ignored.
    def handler(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextmanager
def _process(
    argv: list[str], log: Path, env: dict[str, str], port: int = 0
) -> Iterator[EngineProcess]:
    proc = EngineProcess(argv, log, env, port)
    try:
        yield proc
    finally:
        proc.stop()


def run_demo(
    db_url: str | None,
    options: DemoOptions = DemoOptions(),
    *,
    say: Callable[[str], None] = print,
    progress: ProgressFn | None = None,
    workdir: Path | None = None,
) -> DemoResult:
    """Run the demo; returns what it found and where it is stored.

    Args:
        db_url: the store (None: the embedded SQLite file).
        options: sizes.
        say: receives one line per step.
        progress: receives tuning progress.
        workdir: where engine and agent logs go (default: a fresh temporary directory).
    """
    started = time.monotonic()
    open_store(db_url).dispose()
    url = db_url or default_db_url()
    logs = workdir or Path(os.environ.get("TMPDIR", "/tmp")) / f"slotune-demo-{os.getpid()}"
    logs.mkdir(parents=True, exist_ok=True)
    env = {"SLOTUNE_DB": url}
    cli = slotune_argv()
    k = options.speedup
    with _interrupt_on_signals(), ExitStack() as stack:
        port = free_port()
        say(
            f"starting an emulated vLLM engine ({MODEL} on {GPU}, {k:g}x real time) "
            f"on 127.0.0.1:{port}"
        )
        engine = stack.enter_context(
            _process(
                [
                    *cli,
                    "emulate",
                    "--model",
                    MODEL,
                    "--gpu",
                    GPU,
                    "--port",
                    str(port),
                    "--speedup",
                    str(k),
                ],
                logs / "engine.log",
                env,
                port,
            )
        )
        engine.wait_healthy(120)
        say("starting an agent: scraping the engine's /metrics into the store every second")
        agent = stack.enter_context(
            _process(
                [*cli, "--db", url, "agent", "--scrape", f"vllm={engine.url}", "--interval", "1s"],
                logs / "agent.log",
                env,
            )
        )
        say(
            f"benchmark: {options.num_requests} requests of {WORKLOAD} at "
            f"{options.rate:g} req/s against the default configuration"
        )
        bench = _benchmark(engine.url, url, options)
        say(
            f"  ttft p99 {bench['ttft_p99_ms']:.0f} ms, itl p99 {bench['itl_p99_ms']:.1f} ms, "
            f"goodput {bench['goodput']:.2f} req/s (stored as run {bench['run_id']})"
        )
        lag = fetch_lag(engine.url)
        if lag is not None:
            bench["emulator_lag"] = lag.to_dict()
            say(f"  {lag.describe()}")
        if not agent.is_alive():
            raise TrialFailed(f"the agent stopped: {agent.reason()} (log: {agent.log_path})")
        name = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
        template = (
            f"{shlex.join(cli)} emulate --model {{model}} --gpu {{gpu}} --port {{port}} "
            f"--speedup {k:g} {{engine_args}}"
        )
        spec = StudySpec(
            name=name,
            backend=BackendKind.LAUNCH,
            engine=ENGINE,
            model=MODEL,
            gpu=GPU,
            workload=WORKLOAD,
            trace_file=None,
            slos=SLOS,
            objective=ObjectiveKind.GOODPUT,
            rate=options.rate,
            trials=options.trials,
            num_requests=options.num_requests,
            command=template,
            speedup=k,
            seed=0,
            space=DEMO_SPACE,
            recheck_k=1,
        )
        report = tune_study(spec, db_url, RunOptions(recheck_seeds=1), progress, say)
        _say_untrusted_trials(report, say)
        capacities = _capacities(spec, report, say)
    return DemoResult(
        study=name,
        db=url,
        report=report,
        bench=bench,
        capacities=capacities,
        logs=str(logs),
        rate=options.rate,
        duration_s=time.monotonic() - started,
        ui_command=shlex.join([*cli, "--db", url, "ui"]),
    )


def _capacities(spec: StudySpec, report: StudyReport, say: Callable[[str], None]) -> list[Capacity]:
    """Capacity under the SLOs of the default and the best configuration: the highest rate at
    which every SLO holds on the simulator, then one run at that rate on the emulated engine.

    Goodput at one offered rate can rank a failing default close to the best (it counts
    requests one by one, an SLO needs its percentile); the rate each one sustains cannot.
    """
    picked = [("default", report.default), ("best", report.best)]
    entries = [(label, e.number, e.config) for label, e in picked if e is not None]
    if not entries:
        return []
    say("capacity under the SLOs: the simulator's max-rate search, confirmed on the engine")
    plan = load_plan(spec)
    slos = tuple(parse_slos(spec.slos))
    sim = TrialRunner(
        SimBackend(spec.engine, spec.model, spec.gpu),
        # with the whole workload behind it, so a run that did not reach steady state is
        # run again on more requests instead of reporting a capacity 40 requests cannot hold
        WorkloadPlan(plan.trace, spec.rate, plan.source),
        slos,
        ObjectiveKind.CAPACITY,
    )
    out: list[Capacity] = []
    for label, number, config in entries:
        # The best is often the default itself: one configuration, one verdict (a second
        # run of the same configuration could only disagree by noise).
        same = next((c for c in out if c.number == number), None)
        if same is not None:
            out.append(dataclasses.replace(same, label=label))
            continue
        rate = sim.measure(config).values[0]
        if rate <= 0:
            out.append(Capacity(label, number, config, rate, None, []))
            continue
        runner = TrialRunner(
            make_backend(spec),
            WorkloadPlan(plan.trace, rate, plan.source),
            slos,
            ObjectiveKind.GOODPUT,
        )
        confirmed, attainment, note = confirm(partial(runner.measure, config), label, say)
        out.append(Capacity(label, number, config, rate, confirmed, attainment, note))
    return _best_at_least_default(out, say)


def _best_at_least_default(
    capacities: list[Capacity], say: Callable[[str], None]
) -> list[Capacity]:
    """The study ranks trials at the demo's offered rate, capacity is the judge: a "best"
    that holds less than the default under the SLOs is no recommendation, the default stays."""
    by_label = {c.label: c for c in capacities}
    default, best = by_label.get("default"), by_label.get("best")
    if default is None or best is None or best.sim_rate >= default.sim_rate:
        return capacities
    say(
        f"  the study's best (trial {best.number}) holds {best.sim_rate:.2f} req/s under the "
        f"SLOs, the default {default.sim_rate:.2f}: the default stays the best"
    )
    return [default, dataclasses.replace(default, label="best")]


def emulator_lag(m: Measurement) -> LagReport | None:
    """The emulated engine's lag over a measurement (None: a real engine, or not read)."""
    lag = m.engine.get("emulator_lag")
    if not isinstance(lag, dict):
        return None
    return LagReport(int(lag["num_steps"]), int(lag["num_late_steps"]))


def confirm(
    measure: Callable[[], Measurement], label: str, say: Callable[[str], None]
) -> tuple[bool | None, list[dict[str, Any]], str]:
    """One trustworthy run on the emulated engine: (every SLO held, attainment, note).

    A run during which the engine fell behind real time is run again, up to
    ``CONFIRM_TRIES`` runs in all; when none was trustworthy the verdict is None and the
    note says why.
    """
    for attempt in range(1, CONFIRM_TRIES + 1):
        m = measure()
        attainment = [a.to_dict() for a in m.summary.slo_attainment] if m.summary else []
        lag = emulator_lag(m)
        if lag is None or lag.is_trustworthy:
            return m.is_feasible, attainment, ""
        again = "running it again" if attempt < CONFIRM_TRIES else "giving up"
        say(f"  {label}: confirmation run {attempt} is not trustworthy ({lag.describe()}); {again}")
    note = f"not trustworthy: the emulated engine fell behind real time in all {CONFIRM_TRIES} runs"
    return None, attainment, note


def _say_untrusted_trials(report: StudyReport, say: Callable[[str], None]) -> None:
    untrusted = [
        t.number
        for t in report.trial_details
        if (lag := t.engine.get("emulator_lag")) and not lag.get("is_trustworthy", True)
    ]
    if untrusted:
        say(
            f"  trials {', '.join(map(str, untrusted))} ran while the emulated engine fell behind "
            "real time (the host was short of CPU): their SLO verdicts are not trustworthy"
        )


def _benchmark(engine_url: str, db: str, options: DemoOptions) -> dict[str, Any]:
    k = options.speedup
    config = BenchConfig(
        url=engine_url,
        arrival=ArrivalSpec.from_rate(options.rate * k),
        workload=WORKLOAD,
        num_requests=options.num_requests,
        cooldown=False,
        name="demo-default",
    )
    result = run_benchmark(config)
    # Back to real-GPU time, as the tuner's launch backend does.
    records = [scale_record(r, k) for r in result.records]
    summary = summarize(records, parse_slos(SLOS)).to_dict()
    store = open_store(db)
    try:
        run_id = save_bench_run(
            store,
            BenchRunMeta(
                name="demo-default",
                url=engine_url,
                model=result.model,
                workload=WORKLOAD,
                started_at=result.started_at,
                ended_at=result.ended_at,
                config={**config.to_dict(), "speedup": k},
            ),
            records,
            summary,
        )
    finally:
        store.dispose()
    return {
        "run_id": run_id,
        "ttft_p99_ms": summary["ttft_ms"]["p99"],
        "itl_p99_ms": summary["itl_ms"]["p99"],
        "goodput": summary["goodput"],
        "slos_met": summary["slos_met"],
    }
