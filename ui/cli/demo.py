"""``slotune demo``: emulated engine + agent + benchmark + tuning study, in about two minutes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from slotune.ui.cli._common import JsonOption, console, db_url, err_console, print_json, run
from slotune.ui.cli._options import NumRequestsOption, RateOption, SpeedupOption

if TYPE_CHECKING:
    from slotune.tuner import StudyProgress

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
    with bar:
        result = run(run_demo, db_url(ctx), options, say=say, progress=on_progress)
    if as_json:
        print_json(result)
        return
    _render(result)


def _render(result: dict[str, Any]) -> None:
    r = result["report"]
    best, default = r["best"], r["default"]
    console.print()
    console.print(
        f"[bold]SLOs[/]: {', '.join(r['slos'])}; goodput = requests/s meeting "
        f"every SLO at {result['rate']:g} req/s offered"
    )
    details = {t["number"]: t for t in r["trial_details"]}
    if default:
        # Goodput counts requests one by one, an SLO needs its percentile: a default that
        # breaks a p99 target can still show a goodput close to the best configuration's.
        state = (
            ""
            if default["feasible"]
            else "  [red](breaks an SLO: too few requests within a target, see below)[/]"
        )
        console.print(f"vLLM default configuration: goodput {_v(default['value'])} req/s{state}")
        console.print("    " + _params(default["params"]))
        console.print("    " + _attainment(details[default["number"]]))
    if best:
        console.print(
            f"best configuration found:   goodput {_v(best['value'])} req/s "
            f"(trial {best['number']}, every SLO held)"
        )
        console.print("    " + _params(best["params"]))
        console.print("    " + _attainment(details[best["number"]]))
    else:
        console.print("[red]no configuration met every SLO[/]")
    if r["gain"] is not None:
        console.print(f"[bold green]gain over default: {r['gain']:.2f}×[/]")
    elif best and default and not default["feasible"]:
        console.print(
            f"[bold green]gain over default: the default breaks an SLO at "
            f"{result['rate']:g} req/s, the best configuration meets every one[/]"
        )
    elif r["gain_note"]:
        console.print(f"gain over default: - ({r['gain_note']})")
    console.print(
        f"\nstored in {result['db']} as study [bold]{result['study']}[/] "
        f"(and benchmark run {result['bench']['run_id']}, agent samples)"
    )
    console.print(
        f"  slotune tune show {result['study']}\n"
        f"  slotune tune export {result['study']} --format vllm\n"
        f"  engine and agent logs: {result['logs']}"
    )
    console.print(f"demo took {result['duration_s']:.0f} s")


def _attainment(trial: dict[str, Any]) -> str:
    atts = trial["measurement"].get("slo_attainment", [])
    return "; ".join(
        f"{a['spec']}: {a['attainment']:.0%} of requests within "
        f"(needs {a['objective']:.0%}), observed {a['value']:.0f} ms"
        for a in atts
    )


def _params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def _v(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
