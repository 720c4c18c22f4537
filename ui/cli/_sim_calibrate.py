"""``slotune sim calibrate``: fit the simulator to measured requests, write a catalog overlay.

Reached through ``slotune sim calibrate …`` (the ``sim`` command hands over its extra
arguments): ``--observed FILE`` or ``--run ID``, ``--out overlay.yaml``, and the engine flags
the measurements were taken with, as for ``slotune sim``.
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
    from slotune.tuner.sim.calibration.measured import CalibrationReport, MeanErrors

_VALUE_OPTIONS = ("--observed", "--run", "--target", "--window", "--out", "--fit-fraction")
USAGE = (
    "slotune sim calibrate --model M --gpu G [engine flags] (--observed FILE | --run ID) "
    "--out overlay.yaml [--fit-fraction 0.33] [--json]"
)


@dataclass(frozen=True, slots=True)
class CalibrateArgs:
    """``slotune sim calibrate``'s own options, and the engine flags left over."""

    observed: Path | None
    run_id: int | None
    out: Path | None
    fit_fraction: float
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
        if key in _VALUE_OPTIONS:
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
    return CalibrateArgs(
        observed=None if observed is None else Path(observed),
        run_id=None if run is None else int(run),
        out=None if out is None else Path(out),
        fit_fraction=fraction,
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
    """Parse, load the measurements, fit, write the overlay, print the report."""
    import yaml

    from slotune.tuner.sim import parse_engine_flags
    from slotune.tuner.sim.calibration.measured import calibrate
    from slotune.tuner.sim.config import resolve

    parsed = parse_calibrate_args(args)
    if parsed.out is None and not as_json:
        raise ConfigError(f"--out overlay.yaml is needed (or --json to print only); {USAGE}")
    config = resolve(parse_engine_flags(parsed.engine_flags, engine=engine, model=model, gpu=gpu))
    if parsed.observed is not None:
        from slotune.collector.observed import read_observed

        spec = config.model
        names = {n.lower() for n in (spec.id, spec.hf_name, *spec.aliases)}
        observed = read_observed(parsed.observed, model_names=names)
        source = str(parsed.observed)
    elif parsed.run_id is not None:
        observed = _observed_from_run(db_url, parsed.run_id, config.model.id)
        source = f"slotune bench run {parsed.run_id}"
    else:
        raise ConfigError(f"give --observed FILE or --run ID; usage: {USAGE}")
    report = calibrate(config, observed, fitted_on=source, fit_fraction=parsed.fit_fraction)
    if parsed.out is not None:
        text = yaml.safe_dump(report.overlay(), sort_keys=False)
        try:
            parsed.out.write_text(text, encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot write {parsed.out}: {e.strerror}; check the path") from e
    if as_json:
        print_json(report.to_dict() | {"out": None if parsed.out is None else str(parsed.out)})
        return
    _render(report, parsed.out)


def _observed_from_run(db_url: str | None, run_id: int, model_id: str) -> list[ObservedRequest]:
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


def _render(report: CalibrationReport, out: Path | None) -> None:
    eff = report.efficiency
    console.print(
        f"calibrated {report.config.model.id} on {report.config.gpu.id} from "
        f"{report.fitted_on}: {report.num_fit} requests fitted, {report.num_held_out} held back, "
        f"{report.num_evaluations} simulations"
    )
    factors = (
        f"compute x{eff.compute:.3f}, memory bandwidth x{eff.memory:.3f}, "
        f"step overhead {1000 * (eff.step_overhead_s or 0):.2f} ms"
    )
    if report.config.tensor_parallel_size > 1:
        factors += (
            f", interconnect x{eff.interconnect:.3f}, "
            f"all-reduce +{1e6 * eff.all_reduce_latency_s:.0f} us"
        )
    console.print(factors)
    table = Table(title="simulated vs measured mean")
    for col in ("requests", "", "TTFT", "TPOT", "E2E"):
        table.add_column(col)
    rows: list[tuple[str, str, MeanErrors | None]] = [
        ("fitted", "before", report.fit_before),
        ("fitted", "after", report.fit_after),
        ("held back", "before", report.held_out_before),
        ("held back", "after", report.held_out_after),
    ]
    for label, when, errors in rows:
        if errors is not None:
            table.add_row(
                label, when, f"{errors.ttft:+.1%}", f"{errors.tpot:+.1%}", f"{errors.e2e:+.1%}"
            )
    console.print(table)
    if out is not None:
        console.print(
            f"wrote {out}: use it with --catalog {out} or SLOTUNE_CATALOG={out} "
            "(slotune sim, tune, emulate)"
        )
