"""Calibrate the simulator on what a live engine target served over a window
(``slotune sim calibrate --target NAME --window 30m``), from its metrics alone.

The window gives no requests, only histograms: the request rate (the finished requests'
count), the prompt and output length distributions (vLLM's ``request_prompt_tokens`` and
``request_generation_tokens``) and the measured TTFT and TPOT (means from ``_sum`` /
``_count``, p50 and p90 from the buckets). An open-loop workload is drawn from them
(Poisson arrivals at the window's rate, lengths with the buckets' shares scaled to the
measured means) and every drawn request carries the window's mean TTFT and TPOT, so the step
terms of :mod:`~tuner.sim.calibration.step_fit` are fitted to one mean per metric with the
roofline as the prior (as for published run means). The fit is judged on a second, unseen
draw of the same window: the score is the larger of the mean TTFT and mean TPOT errors, each
over its tolerance (:mod:`~tuner.sim.calibration.objective`); p50 and p90, with the simulated
requests put in the window's own buckets, are reported but not judged (coarse buckets make
them a bucket's width uncertain). A fit that does not lower the score is not to be written.

Not guaranteed: the drawn workload starts from an idle engine while the window was served
in steady state, and the measured TTFT includes the queueing of a loaded engine, which the
fit's TTFT residual (requests that did not queue) does not separate out; both bias a busy
window's fit, which the judged score then shows.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from slotune.collector.errors import ConfigError
from slotune.collector.metrics import PromClient, metrics_reader
from slotune.collector.store import Store
from slotune.collector.textfile import write_text
from slotune.collector.workload import Trace, TraceRequest
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.sim.calibration._replay import Requests, simulate, with_terms
from slotune.tuner.sim.calibration._window import WindowTraffic, read_traffic
from slotune.tuner.sim.calibration.objective import TOLERANCE
from slotune.tuner.sim.calibration.step_fit import TermFit, fit_terms
from slotune.tuner.sim.catalog import get_model, gpu_entry
from slotune.tuner.sim.config import ResolvedConfig, resolve
from slotune.tuner.sim.flags import parse_engine_flags

# Requests drawn per workload: enough for steady means, few enough for the fit's replays.
MAX_DRAWN_REQUESTS = 400
_FIT_SEED, _JUDGE_SEED = 0, 1


@dataclass(frozen=True, slots=True)
class WindowErrors:
    """Signed relative errors of the simulated vs the window's TTFT and TPOT (0.1 = the
    simulation 10 % high), and the score (module docstring): NaN when nothing compares."""

    ttft: float
    tpot: float
    ttft_p50: float
    ttft_p90: float
    tpot_p50: float
    tpot_p90: float
    score: float

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class WindowCalibration:
    """What the window fit found, and how well it and the uncalibrated model predict.

    Attributes:
        config: the engine configuration the window was served with (the prior).
        traffic: the window's figures.
        fit: the fitted step terms with their uncertainty.
        num_drawn: requests per drawn workload.
        fit_before, fit_after: errors on the fitted draw, prior vs fitted.
        judged_before, judged_after: the same on the unseen draw (which decides).
    """

    config: ResolvedConfig
    traffic: WindowTraffic
    fit: TermFit
    num_drawn: int
    fit_before: WindowErrors
    fit_after: WindowErrors
    judged_before: WindowErrors
    judged_after: WindowErrors

    @property
    def is_better(self) -> bool:
        before, after = self.judged_before.score, self.judged_after.score
        return not math.isnan(after) and (math.isnan(before) or after < before)

    @property
    def fitted_on(self) -> str:
        t = self.traffic
        return (
            f"target {t.target}, {t.end_ts - t.start_ts:g} s window ending at {t.end_ts:.0f} "
            f"({t.num_requests} requests)"
        )

    def measured(self) -> dict[str, float]:
        """The window's TTFT and TPOT figures (seconds)."""
        t = self.traffic
        return {
            "ttft": t.ttft.mean,
            "tpot": t.tpot_mean_s,
            "ttft_p50": t.ttft.quantile(0.5),
            "ttft_p90": t.ttft.quantile(0.9),
            "tpot_p50": t.tpot.quantile(0.5),
            "tpot_p90": t.tpot.quantile(0.9),
        }

    def overlay(self) -> dict[str, Any]:
        """The catalog overlay: this GPU with the fitted terms and their provenance."""
        efficiency = dataclasses.replace(self.config.gpu.efficiency, step_terms=self.fit.terms)
        entry = gpu_entry(dataclasses.replace(self.config.gpu, efficiency=efficiency))
        entry["calibrated"] = {
            "by": "slotune sim calibrate --target",
            "date": date.today().isoformat(),
            "fitted_on": self.fitted_on,
            "judged_on": "another draw of the window's rate and lengths",
            "engine_config": self.config.to_dict(),
        } | self.to_dict()
        return {"gpus": [entry]}

    def _errors(self, when: str) -> dict[str, Any]:
        fit = self.fit_before if when == "before" else self.fit_after
        judged = self.judged_before if when == "before" else self.judged_after
        return {"fit": fit.to_dict(), "judged": judged.to_dict()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.config.gpu.id,
            "model": self.config.model.id,
            "window": self.traffic.to_dict(),
            "measured_s": self.measured(),
            "step_terms": self.fit.to_dict(),
            "num_drawn": self.num_drawn,
            "error_before": self._errors("before"),
            "error_after": self._errors("after"),
            "beats_prior": self.is_better,
        }


def draw_requests(traffic: WindowTraffic, n: int, seed: int, *, max_len: int) -> Requests:
    """An open-loop workload of ``n`` requests with the window's rate and lengths, each
    carrying the window's mean TTFT and TPOT as its measured values; a drawn prompt is cut
    so that prompt and output fit in ``max_len`` tokens, as the served ones did."""
    rng = np.random.default_rng(seed)
    prompts = traffic.prompt_tokens.sample(n, rng)
    outputs = np.minimum(traffic.output_tokens.sample(n, rng), max_len - 1)
    inputs = np.minimum(prompts, max_len - outputs)
    gaps = rng.exponential(1.0 / traffic.rate_per_s, size=n)
    gaps[0] = 0.0
    arrivals = np.cumsum(gaps)
    trace = Trace(
        f"window({traffic.target})",
        tuple(
            TraceRequest(timestamp_s=float(t), input_tokens=int(i), output_tokens=int(o))
            for t, i, o in zip(arrivals, inputs, outputs, strict=True)
        ),
        source="metrics window",
    )
    ttft, tpot = traffic.ttft.mean, traffic.tpot_mean_s
    out = outputs.astype(float)
    return Requests(
        trace,
        out,
        {
            "ttft": np.full(n, ttft),
            "tpot": np.where(out > 1, tpot, np.nan),
            "e2e": ttft + tpot * np.maximum(out - 1, 0),
        },
    )


def window_errors(config: ResolvedConfig, traffic: WindowTraffic, drawn: Requests) -> WindowErrors:
    """The simulated draw's errors against the window's figures (module docstring)."""
    sim = simulate(config, drawn)
    tokens = drawn.output_tokens - 1
    decoding = np.isfinite(sim.tpot) & (tokens > 0)
    if traffic.tpot.family == "tpot":
        tpot_mean = float(np.mean(sim.tpot[decoding])) if decoding.any() else math.nan
    else:  # inter-token gaps: every gap of every request counts once
        gaps = (sim.e2e - sim.ttft)[decoding]
        tpot_mean = float(gaps.sum() / tokens[decoding].sum()) if decoding.any() else math.nan
    # A request the simulated engine failed is slower than any real one (as the objective).
    ttft_mean = math.inf if not np.isfinite(sim.ttft).all() else float(np.mean(sim.ttft))
    signed = {
        "ttft": _error(ttft_mean, traffic.ttft.mean),
        "tpot": _error(tpot_mean, traffic.tpot_mean_s),
    }
    # The per-request histogram holds a one-token request's TPOT as 0 (vLLM); the gaps'
    # histogram has no per-request counterpart to compare quantiles with.
    tpot = np.where(tokens > 0, sim.tpot, 0.0)
    quantiles = {
        f"{name}_p{round(q * 100)}": _error(h.quantile_of(values, q), h.quantile(q))
        if name == "ttft" or h.family == "tpot"
        else math.nan
        for name, h, values in (("ttft", traffic.ttft, sim.ttft), ("tpot", traffic.tpot, tpot))
        for q in (0.5, 0.9)
    }
    return WindowErrors(**signed, **quantiles, score=_score(signed))


def _error(simulated: float, measured: float) -> float:
    if not (math.isfinite(measured) and measured > 0) or math.isnan(simulated):
        return math.nan
    return simulated / measured - 1.0


def _score(signed: dict[str, float]) -> float:
    """The larger of the two means' |log ratio| over its tolerance (objective's rule)."""
    normalised = [
        abs(math.log1p(e)) / math.log1p(TOLERANCE[metric, "mean"]) if e > -1.0 else math.inf
        for metric, e in signed.items()
        if not math.isnan(e)
    ]
    return max(normalised) if normalised else math.nan


def fit_window(config: ResolvedConfig, traffic: WindowTraffic) -> WindowCalibration:
    """Fit the step terms to the window and judge them on an unseen draw (module docstring).

    Raises:
        EngineConfigError: the configuration is one the engine refuses.
    """
    n = min(traffic.num_requests, MAX_DRAWN_REQUESTS)
    max_len = int(getattr(config, adapter_for(config.engine).length_param))
    fit_on = draw_requests(traffic, n, _FIT_SEED, max_len=max_len)
    judged_on = draw_requests(traffic, n, _JUDGE_SEED, max_len=max_len)
    # One fitted mean per metric: every drawn request carries the window's means.
    fit = fit_terms(config, fit_on, group_size=n)
    fitted = with_terms(config, fit.terms)
    return WindowCalibration(
        config=config,
        traffic=traffic,
        fit=fit,
        num_drawn=n,
        fit_before=window_errors(config, traffic, fit_on),
        fit_after=window_errors(fitted, traffic, fit_on),
        judged_before=window_errors(config, traffic, judged_on),
        judged_after=window_errors(fitted, traffic, judged_on),
    )


@dataclass(frozen=True, slots=True)
class WindowOutcome:
    """The window calibration, and the overlay file written (None: not written)."""

    report: WindowCalibration
    written: Path | None


def calibrate_window(
    store: Store,
    metrics: PromClient | None,
    target: str,
    engine_flags: Sequence[str],
    *,
    window_s: float,
    end_ts: float | None,
    engine: str,
    model: str | None,
    gpu: str | None,
    out: Path | None,
    force: bool = False,
) -> WindowOutcome:
    """``slotune sim calibrate --target NAME --window D``: fit the engine the flags configure
    to the target's window, read from the store or the query API ``metrics``; write the
    overlay when the fit beats the uncalibrated model (or ``force``).

    Args:
        model: the catalog model; None takes the one the target's ``model_name`` names.

    Raises:
        ConfigError: a non-positive window, an unknown target, too few requests, missing
            histograms, a model that is not the target's, or an unwritable ``out``.
        MetricsUnavailable: the query API cannot be read.
    """
    if not window_s > 0:
        raise ConfigError(f"--window must be positive, got {window_s:g} s; e.g. --window 30m")
    end = time.time() if end_ts is None else end_ts
    traffic = read_traffic(metrics_reader(store, metrics), target, end - window_s, end)
    served = _catalog_model(traffic.model)
    config = resolve(
        parse_engine_flags(engine_flags, engine=engine, model=model or served, gpu=gpu)
    )
    if served is not None and served != config.model.id:
        raise ConfigError(
            f"--target {target} serves {traffic.model!r} (label model_name) but --model is "
            f"{config.model.id!r}; calibrate with --model {served}"
        )
    report = fit_window(config, traffic)
    written = out if out is not None and (report.is_better or force) else None
    if written is not None:
        write_text(written, yaml.safe_dump(report.overlay(), sort_keys=False), "overlay")
    return WindowOutcome(report, written)


def _catalog_model(label: str | None) -> str | None:
    """The catalog id of the model a ``model_name`` label names; None when the catalog does
    not know it (a served alias), so ``--model`` decides."""
    if not label:
        return None
    try:
        return get_model(label).id
    except ConfigError:
        return None
