"""Fit the simulator to one user's measured requests (``slotune sim calibrate``).

The measured arrivals and lengths are replayed through the engine simulator (queueing
included, so a loaded server calibrates as well as an idle one) and the step-time terms of
:mod:`tuner.sim.calibration.step_fit` are fitted to them, with the cost model's roofline as
the prior. The fit is then judged, with :mod:`tuner.sim.calibration.objective`, on requests
it did not see: the later part of the same run (the first third is fitted by default), or
another run (``held_out``, e.g. another rate). A fit whose score there is not below the
uncalibrated model's is reported as such and is not to be written.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from slotune.collector.errors import ConfigError
from slotune.collector.observed import ObservedRequest
from slotune.tuner.engines.base import EngineConfig, ResolvedConfig
from slotune.tuner.sim.calibration._replay import Requests, requests_of, simulate, with_terms
from slotune.tuner.sim.calibration.objective import Errors, errors
from slotune.tuner.sim.calibration.step_fit import GROUP_SIZE, TermFit, fit_terms
from slotune.tuner.sim.catalog import Efficiency, gpu_entry
from slotune.tuner.sim.config import resolve

MIN_FIT_REQUESTS = 30
DEFAULT_FIT_FRACTION = 1 / 3


@dataclass(frozen=True, slots=True)
class CalibrationReport:
    """What ``slotune sim calibrate`` fitted, on what, and how well.

    Attributes:
        config: the engine configuration the measurements were taken with (the prior).
        fit: the fitted step terms with their uncertainty.
        fitted_on: where the fitted measurements come from (file or run).
        judged_on: where the judged ones come from: the held-back later requests, another
            file, or the fitted requests themselves when nothing was held back.
        num_fit, num_held_out: requests fitted / judged apart from them.
        fit_before, fit_after: errors on the fitted requests, prior vs fitted.
        held_out_before, held_out_after: the same on the judged requests (None when
            nothing was held back; the fitted requests are judged instead).
    """

    config: ResolvedConfig
    fit: TermFit
    fitted_on: str
    judged_on: str
    num_fit: int
    num_held_out: int
    fit_before: Errors
    fit_after: Errors
    held_out_before: Errors | None
    held_out_after: Errors | None

    @property
    def efficiency(self) -> Efficiency:
        """The GPU's efficiency with the fitted step terms."""
        return dataclasses.replace(self.config.gpu.efficiency, step_terms=self.fit.terms)

    @property
    def judged_before(self) -> Errors:
        return self.held_out_before or self.fit_before

    @property
    def judged_after(self) -> Errors:
        return self.held_out_after or self.fit_after

    @property
    def is_better(self) -> bool:
        """Whether the fit beats the uncalibrated model on the judged requests."""
        before, after = self.judged_before.score, self.judged_after.score
        return not math.isnan(after) and (math.isnan(before) or after < before)

    def overlay(self) -> dict[str, Any]:
        """The catalog overlay: this GPU with the fitted terms and their provenance."""
        gpu = dataclasses.replace(self.config.gpu, efficiency=self.efficiency)
        entry = gpu_entry(gpu)
        entry["calibrated"] = {
            "by": "slotune sim calibrate",
            "date": date.today().isoformat(),
            "fitted_on": self.fitted_on,
            "judged_on": self.judged_on,
            "engine_config": self.config.to_dict(),
            "requests": {"fit": self.num_fit, "held_out": self.num_held_out},
            "step_terms_sd": dataclasses.asdict(self.fit.sd),
            "error_before": self._errors("before"),
            "error_after": self._errors("after"),
            "beats_prior": self.is_better,
        }
        return {"gpus": [entry]}

    def _errors(self, when: str) -> dict[str, Any]:
        fit = self.fit_before if when == "before" else self.fit_after
        held = self.held_out_before if when == "before" else self.held_out_after
        return {"fit": fit.to_dict(), "held_out": None if held is None else held.to_dict()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.config.gpu.id,
            "model": self.config.model.id,
            "step_terms": self.fit.to_dict(),
            "fitted_on": self.fitted_on,
            "judged_on": self.judged_on,
            "num_fit": self.num_fit,
            "num_held_out": self.num_held_out,
            "num_simulations": self.fit.num_simulations,
            "error_before": self._errors("before"),
            "error_after": self._errors("after"),
            "beats_prior": self.is_better,
        }


def calibrate(
    config: EngineConfig | ResolvedConfig,
    observed: Sequence[ObservedRequest],
    *,
    fitted_on: str,
    fit_fraction: float = DEFAULT_FIT_FRACTION,
    held_out: Sequence[ObservedRequest] | None = None,
    held_out_on: str = "",
    group_size: int = GROUP_SIZE,
) -> CalibrationReport:
    """Fit the step-time terms to measured requests and judge the fit.

    Args:
        config: the engine configuration the measurements were taken with.
        observed: measured requests in arrival order (``collector.observed.read_observed``).
        fitted_on: a description of the data for the report (file name, run id).
        fit_fraction: the first part of ``observed`` (by arrival) that is fitted; the rest
            is held back and judged. Ignored with ``held_out``.
        held_out: another run to judge on instead (e.g. at another rate); all of
            ``observed`` is fitted then.
        held_out_on: a description of ``held_out`` for the report.
        group_size: requests per fitted mean (``step_fit.fit_terms``).

    Raises:
        ConfigError: too few requests to fit, or too few held out to judge on.
        EngineConfigError: the configuration is one the engine refuses.
    """
    resolved = config if isinstance(config, ResolvedConfig) else resolve(config)
    fraction = 1.0 if held_out is not None else fit_fraction
    num_fit = math.ceil(len(observed) * fraction)
    if num_fit < MIN_FIT_REQUESTS:
        needed = math.ceil(MIN_FIT_REQUESTS / fraction)
        raise ConfigError(
            f"{fitted_on}: {len(observed)} requests are too few to calibrate; at least "
            f"{needed} are needed (the first {fraction:.0%}, {MIN_FIT_REQUESTS} or "
            "more, are fitted and the rest held back); measure a longer run"
        )
    if held_out is not None and len(held_out) < MIN_FIT_REQUESTS:
        raise ConfigError(
            f"{held_out_on or 'the held-out run'}: {len(held_out)} requests are too few to "
            f"judge a fit on; give at least {MIN_FIT_REQUESTS}, or leave --held-out out to "
            "hold back the end of the fitted run"
        )
    everything = requests_of(observed, "observed")
    fit_requests = everything.head(num_fit)
    fit = fit_terms(resolved, fit_requests, group_size=group_size)
    fitted = with_terms(resolved, fit.terms)
    if held_out is not None:
        judged = requests_of(held_out, "held out")
        held = (_errors(resolved, judged), _errors(fitted, judged))
        judged_on = held_out_on or "another run"
        num_held = judged.size
    elif num_fit < everything.size:
        # The held-back requests are replayed after the fitted ones, as they were served.
        held = (
            _errors(resolved, everything, start=num_fit),
            _errors(fitted, everything, start=num_fit),
        )
        judged_on = f"the last {everything.size - num_fit} requests of {fitted_on}"
        num_held = everything.size - num_fit
    else:
        held, judged_on, num_held = None, f"the fitted requests of {fitted_on}", 0
    return CalibrationReport(
        config=resolved,
        fit=fit,
        fitted_on=fitted_on,
        judged_on=judged_on,
        num_fit=num_fit,
        num_held_out=num_held,
        fit_before=_errors(resolved, fit_requests),
        fit_after=_errors(fitted, fit_requests),
        held_out_before=None if held is None else held[0],
        held_out_after=None if held is None else held[1],
    )


def _errors(config: ResolvedConfig, requests: Requests, *, start: int = 0) -> Errors:
    """Errors of the simulated requests from ``start`` on (all of them replayed)."""
    sim = simulate(config, requests).metrics()
    return errors(
        {k: v[start:] for k, v in sim.items()},
        {k: v[start:] for k, v in requests.measured.items()},
    )


def simulated_errors(config: ResolvedConfig, observed: Sequence[ObservedRequest]) -> Errors:
    """Errors of ``config``'s simulation of a measured run (benchmarks, reports)."""
    return _errors(config, requests_of(observed, "observed"))
