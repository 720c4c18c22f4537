"""``slotune demo``: emulated engine + agent + benchmark + tuning study + capacity, in minutes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from slotune.ui.cli._common import JsonOption, console, db_url, err_console, print_json
from slotune.ui.cli._options import NumRequestsOption, RateOption, SpeedupOption

if TYPE_CHECKING:
    from slotune.tuner import StudyProgress, StudyReport
    from slotune.tuner.demo import Capacity, DemoResult

# The tuner is imported inside the command: building the CLI (every slotune run, shell
# completion) must not load Optuna, SQLAlchemy or numpy.

DEMO_REQUESTS = 40
DEMO_RATE = 4.0


def demo(
    ctx: typer.Context,
    trials: Annotated[int, typer.Option(help="Tuning trials (trial 0 = vLLM defaults).")] = 6,
    num_requests: NumRequestsOption = DEMO_REQUESTS,
    speedup: SpeedupOption = 2.0,
    rate: RateOption = DEMO_RATE,
    as_json: JsonOption = False,
) -> None:
    """Start an emulated engine and an agent, benchmark it, tune it, show what was found."""
    from slotune.tuner.demo import DemoOptions, run_demo

    bar = Progress(
        TextColumn("  trials"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[best]}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
    task = bar.add_task("trials", total=trials, best="")

    def on_progress(p: StudyProgress) -> None:
        best = f"best goodput {p.best_value:.2f} req/s" if p.best_value is not None else ""
        bar.update(task, completed=p.completed, total=p.target, best=best)

    def say(line: str) -> None:
        bar.console.print(f"[bold]›[/] {line}")

    # The shared options are typed Optional (other commands default to None); here they
    # always have a value.
    options = DemoOptions(
        trials=trials,
        num_requests=num_requests or DEMO_REQUESTS,
        speedup=speedup,
        rate=rate or DEMO_RATE,
    )
    create_if_new(db_url(ctx))
    with bar:
        result = run_demo(db_url(ctx), options, say=say, progress=on_progress)
    if as_json:
        print_json(result.to_dict())
        return
    _render(result)


def create_if_new(url: str | None) -> None:
    """Create the ``--db`` store the demo was pointed at when it does not exist yet (a SQLite
    file not there, or a database without slotune's schema), as the default store is on
    first use. An existing store of another revision is left for ``slotune db upgrade``."""
    from sqlalchemy.engine import make_url

    from slotune.collector.store import schema_status, upgrade

    if url is None:
        return
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = parsed.database
        if path and path != ":memory:" and not Path(path).exists():
            upgrade(url)
            return
    if schema_status(url).current is None:
        upgrade(url)


def _render(result: DemoResult) -> None:
    r = result.report
    console.print()
    console.print(
        f"[bold]SLOs[/]: {', '.join(r.slos)}. Capacity = the highest request rate at which a "
        "configuration meets every SLO (simulator's max-rate search, then one run at that "
        "rate on the emulated engine)"
    )
    for c in result.capacities:
        name = "vLLM default configuration" if c.label == "default" else "best configuration found"
        console.print(f"{name} (trial {c.number}): {_capacity(c)}")
        console.print("    " + escape(_params(c.config, r)))
        if c.slo_attainment:
            console.print("    on the emulated engine: " + _attainment(c.slo_attainment))
    if r.best is None:
        console.print("[red]no configuration met every SLO[/]")
    by_label = {c.label: c for c in result.capacities}
    verdict = gain_verdict(by_label.get("default"), by_label.get("best"))
    if verdict:
        console.print(verdict)
    console.print(
        f"\nstored in {escape(result.db)} as study [bold]{escape(result.study)}[/] "
        f"(and benchmark run {result.bench['run_id']}, agent samples)"
    )
    # Nothing to export when no configuration met every SLO (export says so and fails).
    export = f"  slotune tune export {escape(result.study)} --format vllm\n" if r.best else ""
    console.print(
        f"  slotune tune show {escape(result.study)}\n"
        f"{export}"
        f"  engine and agent logs: {escape(result.logs)}"
    )
    console.print(f"demo took {result.duration_s:.0f} s; open the results in the dashboard:")
    console.print(f"  {escape(result.ui_command)}", highlight=False, soft_wrap=True)


def gain_verdict(default: Capacity | None, best: Capacity | None) -> str:
    """The line comparing the study's best with the default (Rich markup; empty: none)."""
    if default is None or best is None or best.sim_rate <= 0:
        return ""
    if best.number == default.number:
        return "[bold]no gain: the default is the best configuration the study found[/]"
    if best.sim_rate <= default.sim_rate:
        return (
            f"[bold]no gain: the default holds {default.sim_rate:.2f} req/s under the SLOs, "
            f"the study's best (trial {best.number}) {best.sim_rate:.2f} req/s[/]"
        )
    if best.confirmed is False:
        # The simulator's rate sits at the knee; the engine run is what was measured.
        return (
            "[bold yellow]gain over default not confirmed[/]: the simulator puts the best "
            f"at {best.sim_rate:.2f} req/s against the default's {default.sim_rate:.2f}, "
            "but at that rate the emulated engine broke an SLO, so the best is unproven"
        )
    if default.sim_rate > 0:
        return (
            f"[bold green]gain over default: {best.sim_rate / default.sim_rate:.2f}x the "
            f"capacity under the SLOs[/] ({default.sim_rate:.2f} -> {best.sim_rate:.2f} req/s)"
        )
    return (
        "[bold green]gain over default: the default meets the SLOs at no rate tried, "
        f"the best configuration up to {best.sim_rate:.2f} req/s[/]"
    )


def _capacity(c: Capacity) -> str:
    if c.sim_rate <= 0:
        return "[red]meets every SLO at no rate tried[/]"
    held = {True: "every SLO held", False: "[red]an SLO broke[/]", None: "not run"}[c.confirmed]
    held = escape(c.note) if c.note else held
    return f"{c.sim_rate:.2f} req/s under the SLOs (emulated engine at that rate: {held})"


def _attainment(atts: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{a['spec']}: {a['attainment']:.1%} of "
        f"{'token gaps' if a.get('event') == 'token' else 'requests'} within "
        f"(needs {a['objective']:.1%}), observed {a['value']:.0f} ms"
        for a in atts
    )


def _params(config: dict[str, Any], report: StudyReport) -> str:
    # Only the searched parameters: the rest is the same in every configuration.
    entry = report.best or report.default
    searched = set(entry.params) if entry else set(config)
    return " ".join(f"{k}={v}" for k, v in config.items() if k in searched)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
