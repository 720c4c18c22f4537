"""The step terms fitted to closed-loop silicon rows (``collector.silicon``), judged on others.

The same five terms as :mod:`~tuner.sim.calibration.step_fit` (a constant, and costs per new
prompt token, per causal query-key pair, per decoding sequence and per K/V token read), with
the same ridge prior (each term zero, one standard deviation = one typical step of the prior).
Here the data are run means, not requests: each fitted row gives two residuals, the log ratio
of measured to simulated mean TTFT and mean TPOT, and the row's closed loop is replayed with
the candidate terms (Gauss-Newton steps, Jacobians from replays). Only the decode terms (per
sequence, per K/V token) are fitted, to the TPOT residuals; the constant and the prefill terms
stay at zero. A closed loop's TTFT carries its queueing and the synchronized waves of
equal-length requests (docs/simulator.md, "Fidelity"), which prefill terms cannot represent:
fits that moved them to match TTFT made TPOT of unseen rows worse (vLLM Qwen3-32B, fitted on
one input/output length: 3.7 % -> 13.2 %; fitted on all five terms, SGLang's TPOT at unseen
concurrencies went from 4 % to 52 % off).

A fit is judged only on rows it did not see: it is better when neither median |error| (TTFT,
TPOT) of the judged rows grows and their average falls.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import yaml

from slotune.collector.errors import ConfigError
from slotune.collector.silicon import read_silicon
from slotune.collector.textfile import write_text
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.sim.calibration._replay import with_terms
from slotune.tuner.sim.calibration.overlay import CalibrationRequest
from slotune.tuner.sim.calibration.step_fit import damped_step, prior_units
from slotune.tuner.sim.catalog import StepTerms, get_gpu, gpu_entry
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.silicon import SiliconCase, silicon_case, simulate_case

TERMS = tuple(f.name for f in dataclasses.fields(StepTerms))
# Which residuals inform which term (rows: TTFT, TPOT; columns: TERMS).
_INFORMS = np.array([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]], dtype=float)
MIN_FIT_ROWS = 3
_PRIOR_SD = 1.0  # prior_units' unit
_STEP = 0.25  # finite-difference step, in prior standard deviations
_MAX_ITERATIONS = 4
_MAX_FIT_ROWS = 24  # rows replayed per fit step; more are thinned evenly
_RESIDUAL_SD = 0.1  # log units: a run mean's spread between repeated measurements
_MAX_POSTERIOR_SHARE = 0.5  # a term is identified when the rows halve its prior sd


@dataclass(frozen=True, slots=True)
class RowErrors:
    """Median |error| in per cent of the rows' mean TTFT and TPOT."""

    num_rows: int
    ttft_pct: float
    tpot_pct: float

    @property
    def score(self) -> float:
        return (self.ttft_pct + self.tpot_pct) / 2.0

    def to_dict(self) -> dict[str, float | int]:
        return {"rows": self.num_rows, "ttft_pct": self.ttft_pct, "tpot_pct": self.tpot_pct}


@dataclass(frozen=True, slots=True)
class SiliconFit:
    """Fitted terms and the errors before and after, on the fitted and on the judged rows."""

    terms: StepTerms
    fit_before: RowErrors
    fit_after: RowErrors
    judged_before: RowErrors
    judged_after: RowErrors

    @property
    def is_better(self) -> bool:
        before, after = self.judged_before, self.judged_after
        return (
            after.score < before.score
            and after.ttft_pct <= before.ttft_pct
            and after.tpot_pct <= before.tpot_pct
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "step_terms": dataclasses.asdict(self.terms),
            "fit": {"before": self.fit_before.to_dict(), "after": self.fit_after.to_dict()},
            "judged": {
                "before": self.judged_before.to_dict(),
                "after": self.judged_after.to_dict(),
            },
            "beats_prior": self.is_better,
        }


def calibrate_silicon(fit: Sequence[SiliconCase], judged: Sequence[SiliconCase]) -> SiliconFit:
    """Fit the step terms to ``fit`` and judge them on ``judged`` (module docstring).

    Raises:
        ConfigError: too few rows to fit, none to judge, or rows of several GPUs (the terms
            belong to one GPU's catalog entry).
    """
    if len(fit) < MIN_FIT_ROWS:
        raise ConfigError(f"{len(fit)} silicon row(s) to fit; at least {MIN_FIT_ROWS} are needed")
    if not judged:
        raise ConfigError(
            "no silicon rows left to judge the fit on; lower --fit-fraction or give --held-out"
        )
    gpus = {c.config.gpu for c in (*fit, *judged)}
    if len(gpus) > 1:
        raise ConfigError(
            f"silicon rows of several GPUs ({', '.join(sorted(gpus))}); calibrate one GPU at "
            "a time (--gpu)"
        )
    none = StepTerms()
    terms = _fit(list(_thin(fit)))
    return SiliconFit(
        terms=terms,
        fit_before=row_errors(fit, none),
        fit_after=row_errors(fit, terms),
        judged_before=row_errors(judged, none),
        judged_after=row_errors(judged, terms),
    )


def row_errors(cases: Sequence[SiliconCase], terms: StepTerms) -> RowErrors:
    """The median errors of ``cases`` simulated with ``terms``."""
    ttft, tpot = [], []
    for case in cases:
        sim = simulate_case(case, core=_core(case, terms))
        ttft.append(abs(100.0 * (sim.ttft_ms / case.row.ttft_ms - 1.0)))
        tpot.append(abs(100.0 * (sim.tpot_ms / case.row.tpot_ms - 1.0)))
    return RowErrors(len(cases), statistics.median(ttft), statistics.median(tpot))


def _core(case: SiliconCase, terms: StepTerms) -> EngineCore:
    resolved = adapter_for(case.config.engine).resolve(case.config)
    return EngineCore.create(with_terms(resolved, terms))


def _thin(cases: Sequence[SiliconCase]) -> Sequence[SiliconCase]:
    if len(cases) <= _MAX_FIT_ROWS:
        return cases
    step = len(cases) / _MAX_FIT_ROWS
    return [cases[int(i * step)] for i in range(_MAX_FIT_ROWS)]


def _log_means(cases: Sequence[SiliconCase], terms: StepTerms) -> np.ndarray:
    """Simulated log mean TTFT and TPOT of every row (TTFTs first)."""
    sims = [simulate_case(c, core=_core(c, terms)) for c in cases]
    values = [s.ttft_ms for s in sims] + [s.tpot_ms for s in sims]
    out: np.ndarray = np.log(np.maximum(np.array(values), 1e-6))
    return out


def _units(cases: Sequence[SiliconCase]) -> np.ndarray:
    """One prior standard deviation of each term at the rows' median shape."""
    rows = [c.row for c in cases]
    prompt = float(statistics.median(r.input_tokens for r in rows))
    batch = float(statistics.median(r.concurrency for r in rows))
    context = prompt + float(statistics.median(r.output_tokens for r in rows)) / 2.0
    return prior_units(_core(cases[0], StepTerms()).cost, prompt, batch, context)


def _fit(cases: Sequence[SiliconCase]) -> StepTerms:
    units = _units(cases)
    y = np.log(np.array([c.row.ttft_ms for c in cases] + [c.row.tpot_ms for c in cases]))

    def terms(theta: np.ndarray) -> StepTerms:
        return StepTerms(*(float(f"{v:.4g}") for v in theta * units))

    def loss(f: np.ndarray, theta: np.ndarray) -> float:
        return float(np.sum(((y - f) / _RESIDUAL_SD) ** 2) + np.sum(theta**2) / _PRIOR_SD**2)

    k = len(TERMS)
    theta = np.zeros(k)
    f = _log_means(cases, terms(theta))
    normal = np.eye(k) / _PRIOR_SD**2
    for _ in range(_MAX_ITERATIONS):
        jac = np.zeros((y.size, k))
        for j in np.flatnonzero(_INFORMS.any(axis=0)):
            step = np.zeros(k)
            step[j] = _STEP
            jac[:, j] = (_log_means(cases, terms(theta + step)) - f) / _STEP
        jac *= np.repeat(_INFORMS, len(cases), axis=0)
        w = 1.0 / _RESIDUAL_SD**2
        normal = w * jac.T @ jac + np.eye(k) / _PRIOR_SD**2
        delta = np.linalg.solve(normal, w * jac.T @ (y - f) - theta / _PRIOR_SD**2)

        def evaluate(t: np.ndarray) -> tuple[float, np.ndarray]:
            candidate = _log_means(cases, terms(t))
            return loss(candidate, t), candidate

        accepted = damped_step(theta, delta, loss(f, theta), evaluate)
        if accepted is None:
            break
        theta, f, delta = accepted
        if float(np.max(np.abs(delta))) < 0.01:
            break
    # Only terms the rows pin down are kept: rows of one shape leave the per-sequence and the
    # per-K/V-token costs collinear, and a pair fitted there moved TPOT of other lengths from
    # 6.6 % to 30 % off (TensorRT-LLM Llama-3.1-8B, fitted on one input/output length).
    sd = np.sqrt(np.diag(np.linalg.inv(normal)))
    return terms(np.where(sd <= _MAX_POSTERIOR_SHARE * _PRIOR_SD, theta, 0.0))


@dataclass(frozen=True, slots=True)
class SiliconOutcome:
    """A silicon calibration, what it was fitted and judged on, and the overlay written."""

    fit: SiliconFit
    gpu: str
    fitted_on: str
    judged_on: str
    written: Path | None


def calibrate_silicon_file(request: CalibrationRequest, *, gpu: str | None) -> SiliconOutcome:
    """``slotune sim calibrate --silicon FILE``: fit the modellable rows, judge on the rows
    held back (every row not in the fitted share, or ``held_out``'s), write the overlay of
    the GPU with the fitted terms when they are better (or ``force``).

    Raises:
        ConfigError: unreadable files, too few modellable rows, rows of several GPUs.
    """
    path, held_out, fit_fraction = request.silicon, request.held_out, request.fit_fraction
    if path is None:
        raise ConfigError("give --silicon FILE")
    cases = _modelled(path, gpu)
    if held_out is not None:
        fit, judged = cases, _modelled(held_out, gpu)
        judged_on = str(held_out)
    else:
        # rows spread evenly between the two sets, so each covers the file's whole grid
        fitted = [int((i + 1) * fit_fraction) > int(i * fit_fraction) for i in range(len(cases))]
        fit = [c for c, f in zip(cases, fitted, strict=True) if f]
        judged = [c for c, f in zip(cases, fitted, strict=True) if not f]
        judged_on = f"{len(judged)} rows of {path} held back from the fit"
    result = calibrate_silicon(fit, judged)
    gpu_id = fit[0].config.gpu
    out = request.out
    written = out if out is not None and (result.is_better or request.force) else None
    if written is not None:
        _write_overlay(written, gpu_id, result, fitted_on=str(path), judged_on=judged_on)
    return SiliconOutcome(result, gpu_id, str(path), judged_on, written)


def _modelled(path: Path, gpu: str | None) -> list[SiliconCase]:
    cases = []
    for row in read_silicon(path):
        case = silicon_case(row, gpu=gpu)
        if not isinstance(case, str):
            cases.append(case)
    if not cases:
        raise ConfigError(
            f"{path}: no row the simulator models (dense models of the catalog, bf16 or fp8, "
            "one engine serving prefill and decode)"
        )
    return cases


def _write_overlay(
    path: Path, gpu_id: str, result: SiliconFit, *, fitted_on: str, judged_on: str
) -> None:
    gpu = get_gpu(gpu_id)
    efficiency = dataclasses.replace(gpu.efficiency, step_terms=result.terms)
    entry = gpu_entry(dataclasses.replace(gpu, efficiency=efficiency))
    entry["calibrated"] = {
        "by": "slotune sim calibrate --silicon",
        "date": date.today().isoformat(),
        "fitted_on": fitted_on,
        "judged_on": judged_on,
        **result.to_dict(),
    }
    write_text(path, yaml.safe_dump({"gpus": [entry]}, sort_keys=False), "catalog overlay")
