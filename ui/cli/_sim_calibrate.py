"""``slotune sim calibrate``: fit the simulator to measured requests, write a catalog overlay.

A subcommand of ``slotune sim``: ``--observed FILE``, ``--run ID``, ``--silicon FILE``
(closed-loop run means in AIConfigurator's silicon CSV format) or ``--target NAME --window D``
(what a live engine target served, read from the store or ``--metrics``), ``--out overlay.yaml``,
and the engine flags the measurements were taken with, as for ``slotune sim``. ``--model``,
``--gpu``, ``--engine``, ``--catalog`` and ``--json`` may come before ``calibrate`` (as sim's)
or after it.

Exit codes: 0 the fit beats the uncalibrated model on the judged requests (and the overlay
is written); 3 it does not, nothing written; 4 it does not, written anyway (``--force``);
1 bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from slotune.collector.errors import ConfigError
from slotune.ui.cli._common import (
    JsonOption,
    console,
    db_url,
    metrics_client,
    output_file,
    print_json,
    say,
)
from slotune.ui.cli._options import MaybeGpuOption, MaybeModelOption

if TYPE_CHECKING:
    from slotune.tuner.sim.calibration import (
        CalibrationReport,
        CalibrationRequest,
        Errors,
        WindowCalibration,
    )

USAGE = (
    "slotune sim calibrate --model M --gpu G [engine flags] (--observed FILE | --run ID | "
    "--silicon FILE | --target NAME --window 30m [--end TS]) --out overlay.yaml "
    "[--fit-fraction 0.33 | --held-out FILE] [--force] [--json]"
)
EXIT_NOT_BETTER = 3
EXIT_FORCED = 4


def calibrate_command(
    ctx: typer.Context,
    observed: Annotated[
        Path | None,
        typer.Option(help="Measured requests, JSONL (slotune bench --requests-out)."),
    ] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="A stored slotune bench run, by id.")
    ] = None,
    silicon: Annotated[
        Path | None,
        typer.Option(
            help="Closed-loop run means (AIConfigurator's silicon CSV): each row is simulated "
            "with its own engine, model, precision, TP and concurrency; --held-out is then "
            "a silicon CSV too, and the engine flags are not used."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Overlay YAML to write.", callback=output_file)
    ] = None,
    fit_fraction: Annotated[
        float, typer.Option(help="Share of the requests fitted; the rest judge the fit.")
    ] = 1 / 3,
    held_out: Annotated[
        Path | None, typer.Option(help="Judge the fit on these measured requests instead.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Write the overlay even when the fit is not better.")
    ] = False,
    target: Annotated[
        str | None,
        typer.Option(
            help="An engine target, by name (slotune targets list; job/instance with "
            "--metrics): calibrate on what it served over --window, from its histograms."
        ),
    ] = None,
    window: Annotated[
        str | None, typer.Option(help="With --target: the window ending at --end, e.g. 30m.")
    ] = None,
    end: Annotated[
        float | None,
        typer.Option(help="With --target: window end, epoch seconds (default: now)."),
    ] = None,
    engine: Annotated[str | None, typer.Option(help="Engine (default: sim's --engine).")] = None,
    model: MaybeModelOption = None,
    gpu: MaybeGpuOption = None,
    catalog: Annotated[
        list[Path] | None, typer.Option(help="Extra GPU/model catalog YAML (repeat).")
    ] = None,
    json_: JsonOption = False,
) -> None:
    """Fit the simulator to measured requests; write a catalog overlay when it predicts better.

    Engine flags after the options give the configuration the measurements were taken with.

    Measurements: per-request files (--observed), a stored bench run (--run), closed-loop run means (--silicon), or what a live engine target served over a window, read from its histograms in the store or in place with the global --metrics URL (--target, --window).

    Example: slotune sim --model llama-3.1-8b --gpu rtx-4090 calibrate --max-model-len 8192 --observed measured.jsonl --out rtx4090.yaml

    Example: slotune --metrics http://prometheus:9090 sim --model llama-3.1-8b --gpu h100-sxm calibrate --target vllm/10.0.0.5:8000 --window 30m --out h100.yaml

    Exit codes: 0 better (written with --out), 3 not better (nothing written), 4 not better but written (--force), 1 bad input.
    """
    from slotune.tuner.sim.calibration import CalibrationRequest, calibrate_overlay
    from slotune.tuner.sim.catalog import load_catalog_file

    sim: dict[str, Any] = ctx.parent.params if ctx.parent is not None else {}
    as_json = json_ or bool(sim.get("json_"))
    engine, model, gpu = (
        engine or sim.get("engine") or "vllm",
        model or sim.get("model"),
        gpu or sim.get("gpu"),
    )
    is_window = target is not None or window is not None or end is not None
    if is_window:
        _check_window_options(
            ctx,
            target,
            window,
            {"--observed": observed, "--run": run, "--silicon": silicon, "--held-out": held_out},
        )
    elif run is not None and not run.isdigit():
        raise ConfigError(f"--run must be a stored run id (slotune bench list), got {run!r}")
    request = CalibrationRequest(
        observed=observed,
        run_id=None if run is None or is_window else int(run),
        out=out,
        fit_fraction=fit_fraction,
        held_out=held_out,
        force=force,
        silicon=silicon,
    )
    if not is_window:
        request.check(usage=USAGE)
    if out is None and not as_json:
        raise ConfigError(f"--out overlay.yaml is needed (or --json to print only); {USAGE}")
    if silicon is not None:
        _silicon(request, gpu, as_json)
        return
    for path in catalog or ():
        load_catalog_file(path)
    if is_window:
        _window(ctx, str(target), str(window), end, request, (engine, model, gpu), as_json)
        return
    outcome = calibrate_overlay(
        request, ctx.args, engine=engine, model=model, gpu=gpu, db_url=db_url(ctx)
    )
    report, written = outcome.report, outcome.written
    if as_json:
        print_json(report.to_dict() | {"out": None if written is None else str(written)})
    else:
        _render(report, written, out)
    if not report.is_better:
        raise typer.Exit(code=EXIT_FORCED if written is not None else EXIT_NOT_BETTER)


def _check_window_options(
    ctx: typer.Context, target: str | None, window: str | None, others: dict[str, object]
) -> None:
    """--target and --window go together, and with none of the other measurements."""
    if target is None or window is None:
        raise ConfigError(f"--target NAME and --window DURATION go together; usage: {USAGE}")
    given = [name for name, value in others.items() if value is not None]
    source = ctx.get_parameter_source("fit_fraction")
    if source is not None and source.name == "COMMANDLINE":
        given.append("--fit-fraction")
    if given:
        raise ConfigError(
            f"--target/--window calibrates on the target's window alone; leave out "
            f"{', '.join(given)} (or calibrate on those without --target); usage: {USAGE}"
        )


def _window(
    ctx: typer.Context,
    target: str,
    window: str,
    end: float | None,
    request: CalibrationRequest,
    engine_model_gpu: tuple[str, str | None, str | None],
    as_json: bool,
) -> None:
    from slotune.collector.durations import parse_duration_s
    from slotune.collector.store import open_store
    from slotune.tuner.sim.calibration import calibrate_window

    engine, model, gpu = engine_model_gpu
    window_s = parse_duration_s(window, field_name="--window")
    with open_store(db_url(ctx)) as store:
        outcome = calibrate_window(
            store,
            metrics_client(ctx),
            target,
            ctx.args,
            window_s=window_s,
            end_ts=end,
            engine=engine,
            model=model,
            gpu=gpu,
            out=request.out,
            force=request.force,
        )
    report, written = outcome.report, outcome.written
    if as_json:
        print_json(report.to_dict() | {"out": None if written is None else str(written)})
    else:
        _render_window(report, written, request.out)
    if not report.is_better:
        raise typer.Exit(code=EXIT_FORCED if written is not None else EXIT_NOT_BETTER)


def _silicon(request: CalibrationRequest, gpu: str | None, as_json: bool) -> None:
    from slotune.tuner.sim.calibration import calibrate_silicon_file

    outcome = calibrate_silicon_file(request, gpu=gpu)
    fit, written = outcome.fit, outcome.written
    if as_json:
        print_json(
            fit.to_dict() | {"gpu": outcome.gpu, "out": None if written is None else str(written)}
        )
    else:
        table = Table(title=f"{outcome.gpu}: median |error| of the closed-loop run means")
        for col in ("rows", "", "count", "TTFT", "TPOT"):
            table.add_column(col)
        for label, when, e in (
            ("fitted", "before", fit.fit_before),
            ("fitted", "after", fit.fit_after),
            ("judged", "before", fit.judged_before),
            ("judged", "after", fit.judged_after),
        ):
            table.add_row(
                label, when, str(e.num_rows), f"{e.ttft_pct:.1f} %", f"{e.tpot_pct:.1f} %"
            )
        console.print(table)
        console.print(f"judged on {outcome.judged_on}", highlight=False, markup=False)
        if written is not None:
            console.print(
                f"wrote {written}: use it with --catalog {written}", highlight=False, markup=False
            )
        elif not fit.is_better:
            console.print(
                "the fit does not beat the uncalibrated model; nothing written", highlight=False
            )
    if not fit.is_better:
        raise typer.Exit(code=EXIT_FORCED if written is not None else EXIT_NOT_BETTER)


def _render(report: CalibrationReport, written: Path | None, out: Path | None) -> None:
    fit = report.fit
    say(
        f"calibrated {report.config.model.id} on {report.config.gpu.id} from "
        f"{report.fitted_on}: {report.num_fit} requests fitted ({fit.num_ttft} TTFT without "
        f"queueing, {fit.num_tpot} TPOT), judged on {report.judged_on}; "
        f"{fit.num_simulations} simulations"
    )
    _render_terms(report)
    table = Table(title="simulated vs measured (score: worst error / its tolerance)")
    for col in ("requests", "", "TTFT", "TPOT", "E2E", "TTFT p90", "TPOT p90", "E2E p90", "score"):
        table.add_column(col)
    rows: list[tuple[str, str, Errors | None]] = [
        ("fitted", "before", report.fit_before),
        ("fitted", "after", report.fit_after),
        ("held back", "before", report.held_out_before),
        ("held back", "after", report.held_out_after),
    ]
    for label, when, e in rows:
        if e is not None:
            cells = (e.ttft, e.tpot, e.e2e, e.ttft_p90, e.tpot_p90, e.e2e_p90)
            table.add_row(label, when, *(f"{c:+.1%}" for c in cells), f"{e.score:.2f}")
    console.print(table)
    _say_outcome(report, report.judged_on, written, out)


def _render_window(report: WindowCalibration, written: Path | None, out: Path | None) -> None:
    t = report.traffic
    say(
        f"calibrated {report.config.model.id} on {report.config.gpu.id} from "
        f"{report.fitted_on}: {t.rate_per_s:.3g} requests/s, mean prompt "
        f"{t.prompt_tokens.mean:.0f} and output {t.output_tokens.mean:.0f} tokens; "
        f"{report.num_drawn} requests drawn twice (fitted, judged); "
        f"{report.fit.num_simulations} simulations"
    )
    _render_terms(report)
    tpot = "TPOT" if t.tpot.family == "tpot" else "ITL"
    table = Table(
        title="the window vs simulated on the judged draw (score: worse mean error / its tolerance)"
    )
    for col in ("", "TTFT", "TTFT p50", "TTFT p90", tpot, f"{tpot} p50", f"{tpot} p90", "score"):
        table.add_column(col)
    m = report.measured()
    keys = ("ttft", "ttft_p50", "ttft_p90", "tpot", "tpot_p50", "tpot_p90")
    table.add_row("window", *(f"{m[k] * 1e3:.4g} ms" for k in keys), "")
    for when, e in (("before", report.judged_before), ("after", report.judged_after)):
        table.add_row(when, *(f"{getattr(e, k):+.1%}" for k in keys), f"{e.score:.2f}")
    console.print(table)
    _say_outcome(report, "the window", written, out)


def _render_terms(report: CalibrationReport | WindowCalibration) -> None:
    fit = report.fit
    terms = Table(title="step terms added to the roofline (posterior mean ± sd; prior sd)")
    for col in ("term", "value", "sd", "prior sd"):
        terms.add_column(col)
    for name, unit, scale in _TERM_UNITS:
        terms.add_row(
            f"{name} ({unit})",
            f"{getattr(fit.terms, name) * scale:+.4g}",
            f"{getattr(fit.sd, name) * scale:.2g}",
            f"{getattr(fit.prior_sd, name) * scale:.2g}",
        )
    console.print(terms)


def _say_outcome(
    report: CalibrationReport | WindowCalibration,
    judged_on: str,
    written: Path | None,
    out: Path | None,
) -> None:
    before, after = report.judged_before.score, report.judged_after.score
    if not report.is_better:
        say(
            f"the fit does not beat the uncalibrated model on {judged_on} "
            f"(score {after:.2f} vs {before:.2f})"
            + ("" if written is not None else "; nothing written (--force writes it)")
        )
    if written is not None:
        say(
            f"wrote {written}: use it with --catalog {written} or SLOTUNE_CATALOG={written} "
            "(slotune sim, tune, emulate)"
        )
    elif out is None:
        console.print("no --out given: nothing written", highlight=False)


# (term, unit shown, seconds -> unit)
_TERM_UNITS = (
    ("step_s", "ms per step", 1e3),
    ("prefill_token_s", "us per prompt token", 1e6),
    ("attention_pair_s", "ns per query-key pair", 1e9),
    ("decode_seq_s", "us per decoding sequence", 1e6),
    ("kv_token_s", "ns per K/V token read", 1e9),
)
