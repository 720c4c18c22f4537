"""Calibrate the simulator on measured requests (a file or a stored bench run) and write the
catalog overlay that ``--catalog`` / ``SLOTUNE_CATALOG`` load: ``slotune sim calibrate`` and
``slotune tune --calibrate-from``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from slotune.collector.errors import ConfigError
from slotune.collector.observed import ObservedRequest, observed_lines, read_observed
from slotune.collector.textfile import write_text
from slotune.tuner.sim.calibration.measured import CalibrationReport, calibrate
from slotune.tuner.sim.config import resolve
from slotune.tuner.sim.flags import parse_engine_flags

MIN_FIT_FRACTION = 0.05


@dataclass(frozen=True, slots=True)
class CalibrationRequest:
    """What ``slotune sim calibrate`` was asked: the measurements, where to write, how to judge.

    Exactly one of ``observed`` (a measured-requests JSONL file), ``run_id`` (a stored
    ``slotune bench`` run) and ``silicon`` (closed-loop run means, ``collector.silicon``).
    """

    observed: Path | None
    run_id: int | None
    out: Path | None
    fit_fraction: float = 1 / 3
    held_out: Path | None = None
    force: bool = False
    silicon: Path | None = None

    def check(self, *, usage: str) -> None:
        """Raises ConfigError naming the flag when the request cannot run."""
        if sum(x is not None for x in (self.observed, self.run_id, self.silicon)) != 1:
            raise ConfigError(
                f"give exactly one of --observed FILE, --run ID or --silicon FILE; usage: {usage}"
            )
        if not MIN_FIT_FRACTION <= self.fit_fraction <= 1.0:
            raise ConfigError(f"--fit-fraction must be a number between {MIN_FIT_FRACTION} and 1")
        if self.fit_fraction == 1.0 and self.held_out is None:
            # A fit judged on the requests it was fitted to always looks better.
            raise ConfigError(
                "--fit-fraction 1 leaves no request to judge the fit on; use a fraction "
                "below 1, or give --held-out FILE"
            )


@dataclass(frozen=True, slots=True)
class CalibrationOutcome:
    """The report, and the overlay file written (None: not written)."""

    report: CalibrationReport
    written: Path | None


def calibrate_overlay(
    request: CalibrationRequest,
    engine_flags: Sequence[str],
    *,
    engine: str,
    model: str | None,
    gpu: str | None,
    db_url: str | None,
) -> CalibrationOutcome:
    """Fit the engine the flags configure to the measurements; write the overlay when the fit
    beats the uncalibrated model (or ``force``).

    Raises:
        ConfigError: bad measurements, a run of another model, or an unwritable ``out``.
    """
    config = resolve(parse_engine_flags(engine_flags, engine=engine, model=model, gpu=gpu))
    spec = config.model
    names = {n.lower() for n in (spec.id, spec.hf_name, *spec.aliases)}
    if request.observed is not None:
        observed = read_observed(request.observed, model_names=names)
        source = str(request.observed)
    elif request.run_id is not None:
        observed = observed_from_run(db_url, request.run_id, spec.id)
        source = f"slotune bench run {request.run_id}"
    else:
        raise ConfigError("give --observed FILE or --run ID")
    held_out = (
        None if request.held_out is None else read_observed(request.held_out, model_names=names)
    )
    report = calibrate(
        config,
        observed,
        fitted_on=source,
        fit_fraction=request.fit_fraction,
        held_out=held_out,
        held_out_on=str(request.held_out or ""),
    )
    out = request.out
    written = out if out is not None and (report.is_better or request.force) else None
    if written is not None:
        _write_overlay(written, report)
    return CalibrationOutcome(report, written)


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
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror}; check the data directory") from e
    _write_overlay(path, report)
    return path, report


def _write_overlay(path: Path, report: CalibrationReport) -> None:
    write_text(path, yaml.safe_dump(report.overlay(), sort_keys=False), "overlay")


def observed_from_run(db_url: str | None, run_id: int, model_id: str) -> list[ObservedRequest]:
    """A stored bench run's finished requests in the measured-requests form.

    Raises:
        ConfigError: no such run, or it was measured against another model.
    """
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
