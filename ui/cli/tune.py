"""``slotune tune``: SLO-constrained search over engine parameters (see docs/tune.md)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from slotune.collector.figures import figure
from slotune.collector.vocabulary import (
    DEFAULT_ENGINE,
    BackendKind,
    Engine,
    ObjectiveKind,
    SamplerKind,
)
from slotune.ui.cli._common import (
    JsonOption,
    console,
    db_url,
    err_console,
    print_json,
)
from slotune.ui.cli._options import (
    EngineOption,
    GpuOption,
    ModelOption,
    NumRequestsOption,
    RateOption,
    SeedOption,
    SloOption,
    SpeedupOption,
    TraceOption,
    WorkloadOption,
)

if TYPE_CHECKING:
    from slotune.tuner import Infeasibility, StudyProgress, StudyReport, TrialReport

# The tuner is imported inside the commands: building the CLI (every slotune run, each
# `slotune emulate` a trial launches, shell completion) must not load Optuna, SQLAlchemy or numpy.
# The choices come from the dependency-free vocabulary.
PrescreenName = Literal["sim"]

app = typer.Typer(
    help="Search engine parameters that serve the most traffic within the SLOs.",
    no_args_is_help=False,
    invoke_without_command=True,
)

Name = Annotated[str, typer.Argument(help="Study name.")]


@contextmanager
def _progress(
    enabled: bool,
) -> Iterator[tuple[Callable[[StudyProgress], None], Callable[[str], None]]]:
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[best]}"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[eta]}"),
        console=err_console,
        disable=not enabled,
    )
    task = bar.add_task("trials", total=None, best="", eta="")
    started = time.monotonic()
    first: int | None = None  # trials done before this run (a resumed study)

    def on_progress(p: StudyProgress) -> None:
        nonlocal first
        first = p.completed if first is None else first
        best = f"best {p.best_value:.3g}" if p.best_value is not None else "no feasible yet"
        eta = eta_text(time.monotonic() - started, p.completed - first, p.target - p.completed)
        bar.update(task, completed=p.completed, total=p.target, best=best, eta=eta)

    def on_phase(text: str) -> None:
        bar.console.print(f"[bold]›[/] {text}")

    with bar:
        yield on_progress, on_phase


def eta_text(elapsed_s: float, done: int, left: int) -> str:
    """``ETA 12m`` from the time the trials of this run took so far (every backend: a trial on
    a real engine takes minutes, so the estimate is the mean over all of them)."""
    if left <= 0:
        return ""
    if done <= 0:
        return "ETA after the first trial"
    remaining = round(elapsed_s / done * left)
    return (
        f"ETA {remaining // 60}m{remaining % 60:02d}s" if remaining >= 60 else f"ETA {remaining}s"
    )


@app.callback()
def tune_command(
    ctx: typer.Context,
    backend: Annotated[BackendKind, typer.Option(help="Where trials run.")] = BackendKind.SIM,
    engine: EngineOption = DEFAULT_ENGINE,
    model: ModelOption = "llama-3.1-8b",
    gpu: GpuOption = "h100-sxm",
    workload: WorkloadOption = None,
    trace: TraceOption = None,
    rate: RateOption = None,
    num_requests: NumRequestsOption = None,
    slo: SloOption = None,
    objective: Annotated[
        ObjectiveKind, typer.Option(help="What a trial maximises.")
    ] = ObjectiveKind.CAPACITY,
    trials: Annotated[
        int, typer.Option(min=1, help="Completed trials to run (trial 0 = default).")
    ] = 30,
    study: Annotated[str | None, typer.Option(help="Study name (default: generated).")] = None,
    workers: Annotated[int, typer.Option(min=1, help="Local worker processes.")] = 1,
    command: Annotated[
        str | None,
        typer.Option(help="Launch template with {model} {hf_model} {port} {gpu} {engine_args}."),
    ] = None,
    endpoint: Annotated[str | None, typer.Option(help="Attach backend: base URL.")] = None,
    speedup: SpeedupOption = 1.0,
    space: Annotated[Path | None, typer.Option(help="Search-space YAML file.")] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=SPEC override, repeatable: "
            "max_num_seqs=64,128 | x=0.8..0.95 | "
            "x=512..8192:pow2 | x=4 | x=-"
        ),
    ] = None,
    prescreen: Annotated[
        PrescreenName | None, typer.Option(help="'sim': simulated study first.")
    ] = None,
    prescreen_k: Annotated[int, typer.Option(min=0, help="Prescreened configs to seed.")] = 3,
    recheck: Annotated[
        int, typer.Option(min=0, help="Re-measure the best K configs (0: off).")
    ] = 3,
    sampler: Annotated[
        SamplerKind,
        typer.Option(help="The Optuna sampler (tpe: slotune's own, see docs/tune.md)."),
    ] = SamplerKind.TPE,
    seed: SeedOption = 0,
    heartbeat: Annotated[
        int,
        typer.Option(
            min=1, help="Worker heartbeat (s); a trial silent for 3x this is failed and retried."
        ),
    ] = 10,
    startup_timeout: Annotated[
        float,
        typer.Option(
            min=1,
            help="Launch backend: seconds an engine may take to serve (a first vLLM start "
            "compiles for many minutes).",
        ),
    ] = 3600.0,  # tuner.tune.backends.startup.DEFAULT_STARTUP_TIMEOUT_S (not imported here)
    calibrate_from: Annotated[
        int | None,
        typer.Option(
            help="Calibrate the simulator on this stored bench run first (measured on the "
            "engine's default configuration); the study's simulator runs calibrated."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run a tuning study (subcommands: resume, show, export, list)."""
    if ctx.invoked_subcommand is not None:
        return
    from slotune.tuner import RunOptions, check_study, new_study_spec, tune_study

    spec = new_study_spec(
        name=study,
        backend=backend,
        engine=engine,
        model=model,
        gpu=gpu,
        workload=workload,
        trace_file=trace,
        slos=slo or (),
        objective=objective,
        trials=trials,
        rate=rate,
        num_requests=num_requests,
        command=command,
        endpoint=endpoint,
        speedup=speedup,
        space_file=space,
        params=param or (),
        seed=seed,
        sampler=sampler,
        heartbeat_s=heartbeat,
        recheck_k=recheck,
        startup_timeout_s=startup_timeout,
    )
    options = RunOptions(workers=workers, prescreen_k=prescreen_k if prescreen else 0)
    check_study(spec, options)  # before the progress bar: a bad input is one line
    if calibrate_from is not None:
        overlay = _calibration(ctx, calibrate_from, engine, model, gpu, spec.name, as_json)
        spec = dataclasses.replace(spec, catalog=(overlay,))
    with _progress(not as_json) as (on_progress, on_phase):
        report = tune_study(spec, db_url(ctx), options, on_progress, on_phase)
    _render(report, as_json)


def _calibration(
    ctx: typer.Context, run_id: int, engine: str, model: str, gpu: str, study: str, as_json: bool
) -> str:
    """The overlay ``--calibrate-from`` fits, for the study's catalog."""
    from slotune.tuner.sim.calibration import calibrate_for_study

    path, report = calibrate_for_study(
        db_url(ctx), run_id, engine=engine, model=model, gpu=gpu, study=study
    )
    if not as_json:
        console.print(
            f"calibrated {gpu} on bench run {run_id}: score {report.judged_before.score:.2f} "
            f"-> {report.judged_after.score:.2f} on its held-back requests; overlay {path}",
            highlight=False,
        )
    return str(path)


@app.command("resume")
def resume_command(
    ctx: typer.Context,
    name: Name,
    workers: Annotated[int, typer.Option(min=1, help="Local worker processes.")] = 1,
    recheck: Annotated[
        int | None,
        typer.Option(min=0, help="Re-check the best K (default: as the study was started)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Continue a killed or unfinished study up to its trial target."""
    from slotune.tuner import RunOptions, resume_study

    with _progress(not as_json) as (on_progress, on_phase):
        report = resume_study(
            name,
            db_url(ctx),
            RunOptions(workers=workers),
            on_progress,
            on_phase,
            recheck_k=recheck,
        )
    _render(report, as_json)


@app.command("show")
def show_command(ctx: typer.Context, name: Name, as_json: JsonOption = False) -> None:
    """Trials, best vs default, Pareto front and parameter importance of a study."""
    from slotune.tuner import show_study

    report = show_study(name, db_url(ctx))
    if as_json:
        print_json(report.to_dict())
        return
    console.print(_trials_table(report.trial_details))
    _render(report, False)


@app.command("export")
def export_command(
    ctx: typer.Context,
    name: Name,
    fmt: Annotated[
        Engine, typer.Option("--format", help="The engine whose launch format to print.")
    ] = DEFAULT_ENGINE,
) -> None:
    """Print the best configuration as a `vllm serve` command or `trtllm-serve` YAML."""
    from slotune.tuner import export_study

    typer.echo(export_study(name, db_url(ctx), fmt), nl=False)


@app.command("list")
def list_command(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Stored studies, newest first."""
    from slotune.tuner import list_studies_report

    rows = list_studies_report(db_url(ctx))
    if as_json:
        print_json([r.to_dict() for r in rows])
        return
    table = Table(
        "name", "status", "backend", "engine", "model", "gpu", "objective", "trials", "best", "gain"
    )
    for r in rows:
        table.add_row(
            r.name,
            r.status,
            r.backend,
            r.engine,
            r.model,
            r.gpu,
            r.objective,
            str(r.trials or 0),
            _num(r.best_value),
            _gain(r.gain),
        )
    console.print(table)


def _num(x: float | None) -> str:
    return figure(x)


def _gain(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}×"


def _trials_table(details: list[TrialReport]) -> Table:
    table = Table("#", "state", "source", "value", "feasible", "limit", "params / failure")
    for t in details:
        shown = t.failure or " ".join(f"{k}={v}" for k, v in t.params.items())
        table.add_row(
            str(t.number),
            t.state,
            t.source,
            " / ".join(_num(v) for v in t.values or []),
            "yes" if t.feasible else "no",
            t.limit,
            shown,
        )
    return table


def _render(report: StudyReport, as_json: bool) -> None:
    if as_json:
        print_json(report.to_dict())
        return
    unit = report.value_names[0]
    best, default = report.best, report.default
    console.print(
        f"[bold]{escape(report.name)}[/]: {report.trials} trials, "
        f"{report.feasible} feasible, {report.failed} failed to run; "
        f"SLOs {', '.join(report.slos)}"
    )
    if default:
        console.print(
            f"default  ({unit}): {_num(default.value)}"
            + ("" if default.feasible else "  [red](breaks an SLO)[/]")
        )
    if best:
        console.print(
            f"best     ({unit}): {_num(best.value)}  trial {best.number}"
            + ("  (worst of re-runs)" if best.robust else "")
        )
        console.print("         " + escape(" ".join(f"{k}={v}" for k, v in best.params.items())))
    spread = (
        "" if report.gain_spread is None else f"  spread between repeats {report.gain_spread:.3g}"
    )
    console.print(
        f"gain over default: {_gain(report.gain)}{spread}"
        + (f"  ({escape(report.gain_note)})" if report.gain_note else "")
    )
    if report.infeasibility:
        _render_infeasibility(report.infeasibility)
    if report.pareto_front:
        console.print(f"Pareto front: {len(report.pareto_front)} configurations")
    if report.prescreen:
        p = report.prescreen
        console.print(
            f"prescreen: seeded {p['seeded']} configs from {p['study']}; "
            f"trials saved (estimate): {p.get('trials_saved')}"
        )
    if report.importance:
        top = sorted(report.importance.items(), key=lambda kv: -kv[1])[:4]
        console.print("importance: " + ", ".join(f"{k} {v:.2f}" for k, v in top))


def _render_infeasibility(why: Infeasibility) -> None:
    rate = "the trace's timestamps" if why.rate is None else f"{why.rate:.3g} req/s"
    console.print(
        f"[yellow]no configuration met every SLO[/]; closest: trial {why.closest}, at {rate} "
        "(the lowest rate tried):"
    )
    for s in why.slos:
        observed = "" if s.observed_ms is None else f"; observed {_num(s.observed_ms)} ms"
        console.print(
            f"  {escape(s.spec)}: {s.attainment:.1%} within (needs "
            f"{s.objective:.1%}{', met' if s.met else ''}){observed}"
        )
    if why.movers:
        console.print(
            "  parameters that moved the shortfall most: "
            + ", ".join(f"{k} {v:.2f}" for k, v in why.movers.items())
        )


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="tune")
