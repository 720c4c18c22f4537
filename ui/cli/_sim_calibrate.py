"""``slotune sim calibrate``: fit the simulator to measured requests, write a catalog overlay.

Reached through ``slotune sim calibrate …`` (the ``sim`` command hands over its extra
arguments): ``--observed FILE`` or ``--run ID``, ``--out overlay.yaml``, and the engine flags
the measurements were taken with, as for ``slotune sim``.

Exit codes: 0 the fit beats the uncalibrated model on the judged requests (and the overlay
is written); 3 it does not, nothing written; 4 it does not, written anyway (``--force``);
1 bad input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from slotune.collector.errors import ConfigError
from slotune.ui.cli._common import console, print_json

if TYPE_CHECKING:
    from slotune.collector.observed import ObservedRequest
    from slotune.tuner.sim.calibration.measured import CalibrationReport
    from slotune.tuner.sim.calibration.objective import Errors

_VALUE_OPTIONS = (
    "--observed",
    "--run",
    "--target",
    "--window",
    "--out",
    "--fit-fraction",
    "--held-out",
)
USAGE = (
    "slotune sim calibrate --model M --gpu G [engine flags] (--observed FILE | --run ID) "
    "--out overlay.yaml [--fit-fraction 0.33 | --held-out FILE] [--force] [--json]"
)
EXIT_NOT_BETTER = 3
EXIT_FORCED = 4


@dataclass(frozen=True, slots=True)
class CalibrateArgs:
    """``slotune sim calibrate``'s own options, and the engine flags left over."""

    observed: Path | None
    run_id: int | None
    out: Path | None
    fit_fraction: float
    held_out: Path | None
    force: bool
    engine_flags: list[str]


def parse_calibrate_args(args: Sequence[str]) -> CalibrateArgs:
    """Split calibrate's options from the engine flags.

    Raises:
        ConfigError: a missing value, no or two sources, or an option not supported.
    """
    values: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        key, eq, inline = arg.partition("=")
        if arg == "--force":
            values[arg] = ""
        elif key in _VALUE_OPTIONS:
            if eq:
                values[key] = inline
            elif i + 1 < len(args):
                values[key] = args[i + 1]
                i += 1
            else:
                raise ConfigError(f"{key} needs a value; usage: {USAGE}")
        else:
            rest.append(arg)
        i += 1
    if "--target" in values or "--window" in values:
        raise ConfigError(
            "--target/--window (calibrating on scraped engine histograms) is not supported "
            "yet; give --observed FILE or --run ID"
        )
    if ("--observed" in values) == ("--run" in values):
        raise ConfigError(f"give exactly one of --observed FILE or --run ID; usage: {USAGE}")
    run = values.get("--run")
    if run is not None and not run.isdigit():
        raise ConfigError(f"--run must be a stored run id (slotune bench list), got {run!r}")
    try:
        fraction = float(values.get("--fit-fraction", "0.3333333333333333"))
    except ValueError:
        fraction = -1.0
    if not 0.05 <= fraction <= 1.0:
        raise ConfigError("--fit-fraction must be a number between 0.05 and 1")
    observed = values.get("--observed")
    out = values.get("--out")
    held_out = values.get("--held-out")
    return CalibrateArgs(
        observed=None if observed is None else Path(observed),
        run_id=None if run is None else int(run),
        out=None if out is None else Path(out),
        fit_fraction=fraction,
        held_out=None if held_out is None else Path(held_out),
        force="--force" in values,
        engine_flags=rest,
    )


def run_calibrate(
    args: Sequence[str],
    *,
    engine: str,
    model: str | None,
    gpu: str | None,
    db_url: str | None,
    as_json: bool,
) -> None:
    """Parse, load the measurements, fit, write the overlay, print the report.

    Raises:
        typer.Exit: with ``EXIT_NOT_BETTER`` or ``EXIT_FORCED`` when the fit does not beat
            the uncalibrated model.
    """
    import typer
    import yaml

    from slotune.collector.observed import read_observed
    from slotune.tuner.sim import parse_engine_flags
    from slotune.tuner.sim.calibration.measured import calibrate
    from slotune.tuner.sim.config import resolve

    parsed = parse_calibrate_args(args)
    if parsed.out is None and not as_json:
        raise ConfigError(f"--out overlay.yaml is needed (or --json to print only); {USAGE}")
    config = resolve(parse_engine_flags(parsed.engine_flags, engine=engine, model=model, gpu=gpu))
    spec = config.model
    names = {n.lower() for n in (spec.id, spec.hf_name, *spec.aliases)}
    if parsed.observed is not None:
        observed = read_observed(parsed.observed, model_names=names)
        source = str(parsed.observed)
    elif parsed.run_id is not None:
        observed = observed_from_run(db_url, parsed.run_id, config.model.id)
        source = f"slotune bench run {parsed.run_id}"
    else:
        raise ConfigError(f"give --observed FILE or --run ID; usage: {USAGE}")
    held_out = (
        None if parsed.held_out is None else read_observed(parsed.held_out, model_names=names)
    )
    report = calibrate(
        config,
        observed,
        fitted_on=source,
        fit_fraction=parsed.fit_fraction,
        held_out=held_out,
        held_out_on=str(parsed.held_out or ""),
    )
    written = parsed.out if parsed.out is not None and (report.is_better or parsed.force) else None
    if written is not None:
        text = yaml.safe_dump(report.overlay(), sort_keys=False)
        try:
            written.write_text(text, encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot write {written}: {e.strerror}; check the path") from e
    if as_json:
        print_json(report.to_dict() | {"out": None if written is None else str(written)})
    else:
        _render(report, written, parsed.out)
    if not report.is_better:
        raise typer.Exit(code=EXIT_FORCED if written is not None else EXIT_NOT_BETTER)


def calibrate_for_study(
    db_url: str | None, run_id: int, *, engine: str, model: str, gpu: str, study: str
) -> tuple[Path, CalibrationReport]:
    """``tune --calibrate-from RUN``: calibrate on a stored bench run measured on the engine's
    default configuration, and write the overlay the study's workers load.

    Returns:
        The overlay's path (under the user's data directory, named after the study) and
        the report.

    Raises:
        ConfigError: the run cannot be used, or the fit does not beat the uncalibrated
            model on the run's held-back requests (nothing is written then).
    """
    import platformdirs
    import yaml

    from slotune.tuner.sim import parse_engine_flags
    from slotune.tuner.sim.calibration.measured import calibrate
    from slotune.tuner.sim.config import resolve

    config = resolve(parse_engine_flags([], engine=engine, model=model, gpu=gpu))
    observed = observed_from_run(db_url, run_id, config.model.id)
    report = calibrate(config, observed, fitted_on=f"slotune bench run {run_id}")
    if not report.is_better:
        raise ConfigError(
            f"--calibrate-from {run_id}: the fit does not beat the uncalibrated model on the "
            f"run's held-back requests (score {report.judged_after.score:.2f} vs "
            f"{report.judged_before.score:.2f}); tune without it, or see `slotune sim "
            f"calibrate --run {run_id}` for the figures"
        )
    path = Path(platformdirs.user_data_dir("slotune")) / "calibrations" / f"{study}.yaml"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(report.overlay(), sort_keys=False), encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror}; check the data directory") from e
    return path, report


def observed_from_run(db_url: str | None, run_id: int, model_id: str) -> list[ObservedRequest]:
    """A stored bench run's finished requests in the measured-requests form.

    Raises:
        ConfigError: no such run, or it was measured against another model.
    """
    from slotune.collector.observed import ObservedRequest, observed_lines
    from slotune.collector.store import load_bench_run, open_store
    from slotune.tuner.sim.catalog import get_model

    with open_store(db_url) as store:
        run = load_bench_run(store, run_id)
    try:
        run_model = get_model(run.meta.model).id
    except ConfigError:
        run_model = run.meta.model
    if run_model != model_id:
        raise ConfigError(
            f"run {run_id}: field 'model' is {run.meta.model!r} but --model is {model_id!r}; "
            "calibrate on a run measured against the same model"
        )
    return [
        ObservedRequest(
            timestamp_s=line["timestamp"],
            input_tokens=line["input_tokens"],
            output_tokens=line["output_tokens"],
            ttft_ms=line["ttft_ms"],
            e2e_ms=line["e2e_ms"],
            tpot_ms=line.get("tpot_ms"),
            request_id=str(line["request_id"]),
            line=n,
        )
        for n, line in enumerate(
            observed_lines(sorted(run.records, key=lambda r: r.send_s)), start=1
        )
    ]


def _render(report: CalibrationReport, written: Path | None, out: Path | None) -> None:
    fit = report.fit
    console.print(
        f"calibrated {report.config.model.id} on {report.config.gpu.id} from "
        f"{report.fitted_on}: {report.num_fit} requests fitted ({fit.num_ttft} TTFT without "
        f"queueing, {fit.num_tpot} TPOT), judged on {report.judged_on}; "
        f"{fit.num_simulations} simulations",
        highlight=False,
    )
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
    before, after = report.judged_before.score, report.judged_after.score
    if not report.is_better:
        console.print(
            f"the fit does not beat the uncalibrated model on {report.judged_on} "
            f"(score {after:.2f} vs {before:.2f})"
            + ("" if written is not None else "; nothing written (--force writes it)"),
            highlight=False,
        )
    if written is not None:
        console.print(
            f"wrote {written}: use it with --catalog {written} or SLOTUNE_CATALOG={written} "
            "(slotune sim, tune, emulate)",
            highlight=False,
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
