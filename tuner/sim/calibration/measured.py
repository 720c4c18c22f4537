"""Fit the simulator to one user's measured requests (``slotune sim calibrate``).

Simulation-based: the measured arrivals and lengths are replayed through the engine
simulator with candidate factors (effective compute and memory-bandwidth efficiency, host
time per step, and with tensor parallelism the interconnect's efficiency and latency), and
a bounded Nelder-Mead search picks the factors whose simulated requests match the measured
ones best. Queueing is part of the simulation, so a loaded server calibrates as well as an
idle one.

The requests are split in time: the first part (a third by default) is fitted, the rest is
held back and only scored, before and after, so the report says how well the fit carries
over to requests it has not seen.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.collector.observed import ObservedRequest
from slotune.collector.workload import Trace
from slotune.collector.workload.traces import TraceRequest
from slotune.tuner.sim.calibration._optimize import minimize
from slotune.tuner.sim.catalog import Efficiency, gpu_entry
from slotune.tuner.sim.config import (
    EngineConfig,
    ResolvedConfig,
    ResolvedTrtllm,
    ResolvedVllm,
    resolve,
)
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.results import RequestTiming
from slotune.tuner.sim.simulator import replay_timings

MIN_FIT_REQUESTS = 30
DEFAULT_FIT_FRACTION = 1 / 3
_MAX_EVALS = 160
_DEFAULT_STEP_OVERHEAD_S = 1.6e-3


@dataclass(frozen=True, slots=True)
class MeanErrors:
    """Signed relative errors of simulated vs measured means (0.1 = simulation 10 % high)."""

    ttft: float
    tpot: float
    e2e: float
    num_requests: int

    def to_dict(self) -> dict[str, float | int]:
        return {
            "ttft": self.ttft,
            "tpot": self.tpot,
            "e2e": self.e2e,
            "num_requests": self.num_requests,
        }


@dataclass(frozen=True, slots=True)
class CalibrationReport:
    """What ``slotune sim calibrate`` fitted, on what, and how well.

    Attributes:
        config: the engine configuration the measurements were taken with.
        efficiency: the fitted factors.
        fitted_on: where the measurements come from (file or run).
        num_fit, num_held_out: requests fitted / held back.
        fit_before, fit_after: errors on the fitted requests, bundled catalog vs fitted.
        held_out_before, held_out_after: the same on the held-back requests.
        num_evaluations: simulations the search ran.
    """

    config: ResolvedConfig
    efficiency: Efficiency
    fitted_on: str
    num_fit: int
    num_held_out: int
    fit_before: MeanErrors
    fit_after: MeanErrors
    held_out_before: MeanErrors | None
    held_out_after: MeanErrors | None
    num_evaluations: int

    def overlay(self) -> dict[str, Any]:
        """The catalog overlay: this GPU with the fitted ``efficiency`` and its provenance."""
        gpu = dataclasses.replace(self.config.gpu, efficiency=self.efficiency)
        entry = gpu_entry(gpu)
        entry["calibrated"] = {
            "by": "slotune sim calibrate",
            "date": date.today().isoformat(),
            "fitted_on": self.fitted_on,
            "engine_config": self.config.to_dict(),
            "requests": {"fit": self.num_fit, "held_out": self.num_held_out},
            "mean_error_before": _errors_dict(self.fit_before, self.held_out_before),
            "mean_error_after": _errors_dict(self.fit_after, self.held_out_after),
        }
        return {"gpus": [entry]}

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.config.gpu.id,
            "model": self.config.model.id,
            "efficiency": dataclasses.asdict(self.efficiency),
            "fitted_on": self.fitted_on,
            "num_fit": self.num_fit,
            "num_held_out": self.num_held_out,
            "num_evaluations": self.num_evaluations,
            "error_before": _errors_dict(self.fit_before, self.held_out_before),
            "error_after": _errors_dict(self.fit_after, self.held_out_after),
        }


def _errors_dict(fit: MeanErrors, held_out: MeanErrors | None) -> dict[str, Any]:
    return {"fit": fit.to_dict(), "held_out": None if held_out is None else held_out.to_dict()}


@dataclass(frozen=True, slots=True)
class _Measured:
    """Measured means and per-request values of one set of requests (seconds)."""

    index: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray


def calibrate(
    config: EngineConfig | ResolvedConfig,
    observed: Sequence[ObservedRequest],
    *,
    fitted_on: str,
    fit_fraction: float = DEFAULT_FIT_FRACTION,
    max_evaluations: int = _MAX_EVALS,
) -> CalibrationReport:
    """Fit the GPU's efficiency factors to measured requests.

    Args:
        config: the engine configuration the measurements were taken with.
        observed: measured requests in arrival order (``collector.observed.read_observed``).
        fitted_on: a description of the data for the report (file name, run id).
        fit_fraction: the first part of the requests (by arrival) that is fitted; the
            rest is held back and only scored.
        max_evaluations: most simulations the search may run.

    Raises:
        ConfigError: too few requests to fit.
        EngineConfigError: the configuration is one the engine refuses.
    """
    resolved = config if isinstance(config, ResolvedVllm | ResolvedTrtllm) else resolve(config)
    num_fit = math.ceil(len(observed) * fit_fraction)
    if num_fit < MIN_FIT_REQUESTS:
        needed = math.ceil(MIN_FIT_REQUESTS / fit_fraction)
        raise ConfigError(
            f"{fitted_on}: {len(observed)} requests are too few to calibrate; at least "
            f"{needed} are needed (the first {fit_fraction:.0%}, {MIN_FIT_REQUESTS} or "
            "more, are fitted and the rest held back); measure a longer run"
        )
    trace = _trace(observed)
    fit_trace = Trace(trace.name, trace.requests[:num_fit], trace.source)
    fit_measured = _measured(observed, range(num_fit))
    held = _measured(observed, range(num_fit, len(observed)))
    has_tp = _tensor_parallel_size(resolved) > 1

    evaluations = 0

    def loss(x: np.ndarray) -> float:
        nonlocal evaluations
        evaluations += 1
        timings = replay_timings(EngineCore.create(_with(resolved, _efficiency(x))), fit_trace)
        return _loss(fit_measured, timings, observed)

    start = _start(resolved.gpu.efficiency, has_tp)
    lower, upper, steps = _bounds(has_tp)
    best, _ = minimize(loss, start, lower, upper, steps=steps, max_evals=max_evaluations)
    fitted = _efficiency(best)

    base_full = replay_timings(EngineCore.create(resolved), trace)
    fitted_full = replay_timings(EngineCore.create(_with(resolved, fitted)), trace)
    return CalibrationReport(
        config=resolved,
        efficiency=fitted,
        fitted_on=fitted_on,
        num_fit=num_fit,
        num_held_out=len(observed) - num_fit,
        fit_before=_mean_errors(fit_measured, base_full, observed),
        fit_after=_mean_errors(fit_measured, fitted_full, observed),
        held_out_before=_mean_errors(held, base_full, observed) if held.index.size else None,
        held_out_after=_mean_errors(held, fitted_full, observed) if held.index.size else None,
        num_evaluations=evaluations,
    )


def _tensor_parallel_size(config: ResolvedConfig) -> int:
    return config.tensor_parallel_size


def _with(config: ResolvedConfig, efficiency: Efficiency) -> ResolvedConfig:
    return dataclasses.replace(config, gpu=dataclasses.replace(config.gpu, efficiency=efficiency))


# Search space, in logs of the factors (one unit = a factor e), and the all-reduce latency
# in units of 100 us: compute, memory, step overhead, [interconnect, all-reduce latency].
def _start(current: Efficiency, has_tp: bool) -> list[float]:
    overhead = current.step_overhead_s or _DEFAULT_STEP_OVERHEAD_S
    x = [math.log(current.compute), math.log(current.memory), math.log(overhead)]
    if has_tp:
        x += [math.log(current.interconnect), current.all_reduce_latency_s / 1e-4]
    return x


def _bounds(has_tp: bool) -> tuple[list[float], list[float], list[float]]:
    lower = [math.log(0.1), math.log(0.1), math.log(5e-5)]
    upper = [math.log(4.0), math.log(4.0), math.log(0.05)]
    steps = [0.3, 0.3, 0.5]
    if has_tp:
        lower += [math.log(0.01), 0.0]
        upper += [math.log(4.0), 5.0]
        steps += [0.5, 0.3]
    return lower, upper, steps


def _efficiency(x: np.ndarray) -> Efficiency:
    return Efficiency(
        compute=round(math.exp(x[0]), 4),
        memory=round(math.exp(x[1]), 4),
        step_overhead_s=float(f"{math.exp(x[2]):.4g}"),
        interconnect=round(math.exp(x[3]), 4) if len(x) > 3 else 1.0,
        all_reduce_latency_s=float(f"{x[4] * 1e-4:.4g}") if len(x) > 4 else 0.0,
    )


def _trace(observed: Sequence[ObservedRequest]) -> Trace:
    t0 = observed[0].timestamp_s if observed else 0.0
    return Trace(
        "observed",
        tuple(
            TraceRequest(
                timestamp_s=r.timestamp_s - t0,
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                hash_ids=r.hash_ids,
                block_size=r.block_size,
            )
            for r in observed
        ),
    )


def _measured(observed: Sequence[ObservedRequest], indices: range) -> _Measured:
    rows = [observed[i] for i in indices]
    return _Measured(
        index=np.fromiter(indices, dtype=np.intp, count=len(indices)),
        ttft_s=np.array([r.ttft_ms / 1000.0 for r in rows]),
        tpot_s=np.array([np.nan if r.tpot_ms is None else r.tpot_ms / 1000.0 for r in rows]),
        e2e_s=np.array([r.e2e_ms / 1000.0 for r in rows]),
    )


def _simulated(
    measured: _Measured, timings: Sequence[RequestTiming], observed: Sequence[ObservedRequest]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Simulated TTFT, TPOT, E2E of the measured requests (NaN where the engine failed)."""
    n = measured.index.size
    ttft, tpot, e2e = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    for k, i in enumerate(measured.index):
        t = timings[i]
        if t.first_token_s is None or t.finished_s is None:
            continue
        ttft[k] = t.first_token_s - t.arrival_s
        e2e[k] = t.finished_s - t.arrival_s
        out = observed[i].output_tokens
        if out > 1:
            tpot[k] = (t.finished_s - t.first_token_s) / (out - 1)
    return ttft, tpot, e2e


def _mean_ratio(sim: np.ndarray, real: np.ndarray) -> float:
    ok = np.isfinite(sim) & np.isfinite(real)
    if not ok.any() or real[ok].mean() <= 0:
        return math.nan
    return float(sim[ok].mean() / real[ok].mean())


def _mean_errors(
    measured: _Measured, timings: Sequence[RequestTiming], observed: Sequence[ObservedRequest]
) -> MeanErrors:
    ttft, tpot, e2e = _simulated(measured, timings, observed)
    return MeanErrors(
        ttft=_mean_ratio(ttft, measured.ttft_s) - 1.0,
        tpot=_mean_ratio(tpot, measured.tpot_s) - 1.0,
        e2e=_mean_ratio(e2e, measured.e2e_s) - 1.0,
        num_requests=int(measured.index.size),
    )


def _loss(
    measured: _Measured, timings: Sequence[RequestTiming], observed: Sequence[ObservedRequest]
) -> float:
    """Misfit of means and of single requests (log ratios, so too fast and too slow weigh
    alike); a request the simulated engine failed counts as badly missed."""
    ttft, tpot, e2e = _simulated(measured, timings, observed)
    total = 0.0
    for sim, real, weight in (
        (ttft, measured.ttft_s, 0.5),
        (tpot, measured.tpot_s, 1.0),
        (e2e, measured.e2e_s, 1.0),
    ):
        ok = np.isfinite(real) & (real > 0)
        if not ok.any():
            continue
        done = ok & np.isfinite(sim) & (sim > 0)
        ratio = _mean_ratio(sim, real)
        mean_term = abs(math.log(ratio)) if ratio > 0 else 5.0
        per_request = np.full(int(ok.sum()), 5.0)
        per_request[done[ok]] = np.abs(np.log(sim[done] / real[done]))
        total += weight * (mean_term + float(np.median(per_request)))
    return total
