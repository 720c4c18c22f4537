"""The step-time terms fitted to measured requests, with the roofline model as the prior.

The calibrated step time is the cost model's roofline time plus five terms
(:class:`~tuner.sim.catalog.StepTerms`): a constant, and costs per new prompt token, per
causal query-key pair of the prefill chunks, per decoding sequence and per K/V token read.
The terms are the unknowns ``theta`` of a Bayesian (ridge) regression:

* prior: each term is zero with a standard deviation of one typical step of the prior
  (the term at the fitted data's typical batch adds ±100 % of the roofline's time), so with
  no data the roofline is left as it is, and a few requests move it little;
* likelihood: the log ratio of measured to simulated mean TTFT of the requests that did
  not queue (in the replay; their TTFT is their own prefill steps), in groups of ten by
  prompt length, and of mean TPOT of all requests (the decode steps at the batch sizes the
  replay reconstructs), in groups of ten by arrival; Gaussian, each group's standard error
  taken from its requests' spread. Group means, not single requests, because the objective
  judges means and single requests on a shared host are noisy and skewed;
* the replay is not linear in ``theta`` (batches change as steps get longer), so the
  posterior mode is found by Gauss-Newton steps with Jacobians from replays, and the
  posterior covariance is the inverse of the last step's normal matrix (a Laplace
  approximation). It treats groups as independent; requests measured on one server at one
  time share its noise, so the uncertainty is a lower bound.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from slotune.tuner.sim.calibration._replay import Requests, Simulated, simulate, with_terms
from slotune.tuner.sim.catalog import StepTerms
from slotune.tuner.sim.config import ResolvedConfig
from slotune.tuner.sim.cost import CostModel
from slotune.tuner.sim.engine import EngineCore

TERMS = tuple(f.name for f in dataclasses.fields(StepTerms))
_PRIOR_SD = 1.0
_STEP = 0.25  # finite-difference step, in prior standard deviations
_MAX_ITERATIONS = 6
_MIN_SCALE = 0.02  # floor of a group's standard error (log units)
GROUP_SIZE = 10  # requests per residual: group means, because the objective judges means
# A request counts as not queued when it waited under this share of its TTFT for its
# first step (in the replay): the rest of its TTFT is its own prefill.
_MAX_WAIT_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class TermFit:
    """Posterior of the step terms.

    Attributes:
        terms: the posterior mode (seconds per unit of each term).
        sd: posterior standard deviation of each term, same units.
        prior_sd: the prior's standard deviation of each term.
        num_ttft: requests whose TTFT was fitted (they did not queue).
        num_tpot: requests whose TPOT was fitted.
        num_simulations: replays run.
    """

    terms: StepTerms
    sd: StepTerms
    prior_sd: StepTerms
    num_ttft: int
    num_tpot: int
    num_simulations: int

    def to_dict(self) -> dict[str, object]:
        return {
            "terms": dataclasses.asdict(self.terms),
            "sd": dataclasses.asdict(self.sd),
            "prior_sd": dataclasses.asdict(self.prior_sd),
            "num_ttft": self.num_ttft,
            "num_tpot": self.num_tpot,
            "num_simulations": self.num_simulations,
        }


def _units(config: ResolvedConfig, requests: Requests, prior: Simulated) -> np.ndarray:
    """One prior standard deviation of each term, in seconds per unit."""
    cost = EngineCore.create(config).cost
    inputs = np.array([r.input_tokens for r in requests.trace.requests], dtype=float)
    prompt = max(1.0, float(inputs.mean()))
    context = prompt + float(requests.output_tokens.mean()) / 2.0
    arrivals = np.array([r.timestamp_s for r in requests.trace.requests])
    decode_s = np.nan_to_num(prior.e2e - prior.ttft)
    span = float(np.nanmax(arrivals + np.nan_to_num(prior.e2e)) - arrivals.min())
    batch = max(1.0, float(decode_s.sum()) / span) if span > 0 else 1.0
    return prior_units(cost, prompt, batch, context)


def prior_units(cost: CostModel, prompt: float, batch: float, context: float) -> np.ndarray:
    """One prior standard deviation of each term (seconds per unit): the term adds one
    typical step at a typical prompt, batch and context."""
    decode_step = cost.step_time_s(0, 0.0, round(batch), round(batch * context), 0)
    prefill_step = cost.step_time_s(round(prompt), prompt * prompt / 2.0, 0, 0, 1)
    return _PRIOR_SD * np.array(
        [
            decode_step,
            prefill_step / prompt,
            prefill_step / (prompt * prompt / 2.0),
            decode_step / batch,
            decode_step / (batch * context),
        ]
    )


def _terms(theta: np.ndarray, units: np.ndarray) -> StepTerms:
    return StepTerms(*(float(f"{v:.4g}") for v in theta * units))


class _Problem:
    """Residuals and replays of one fit."""

    def __init__(
        self, config: ResolvedConfig, requests: Requests, units: np.ndarray, group_size: int
    ) -> None:
        self.config, self.requests, self.units = config, requests, units
        self.group_size = group_size
        self.num_simulations = 0

    def simulate(self, theta: np.ndarray) -> Simulated:
        self.num_simulations += 1
        return simulate(with_terms(self.config, _terms(theta, self.units)), self.requests)

    def groups(self, sim: Simulated) -> list[tuple[str, np.ndarray]]:
        """The residuals' request groups (module docstring): requests that did not queue by
        prompt length for TTFT, all requests by arrival for TPOT."""
        m = self.requests.measured
        own = np.isfinite(sim.wait) & (sim.wait <= _MAX_WAIT_SHARE * sim.ttft)
        ttft = np.isfinite(m["ttft"]) & (m["ttft"] > 0) & np.isfinite(sim.ttft) & own
        tpot = np.isfinite(m["tpot"]) & (m["tpot"] > 0) & np.isfinite(sim.tpot) & (sim.tpot > 0)
        prompt = np.array([r.input_tokens for r in self.requests.trace.requests])
        by_prompt = np.flatnonzero(ttft)[np.argsort(prompt[ttft], kind="stable")]
        size = self.group_size
        return [("ttft", g) for g in _chunks(by_prompt, size)] + [
            ("tpot", g) for g in _chunks(np.flatnonzero(tpot), size)
        ]

    def log_means(
        self, values: dict[str, np.ndarray], groups: list[tuple[str, np.ndarray]]
    ) -> np.ndarray:
        return np.array([np.log(np.mean(values[k][g])) for k, g in groups])


def _chunks(indices: np.ndarray, size: int) -> list[np.ndarray]:
    """Consecutive groups of about ``size`` requests (the last one absorbs the rest)."""
    n = max(1, indices.size // size)
    return [g for g in np.array_split(indices, n) if g.size]


def _group_sd(
    sim: dict[str, np.ndarray],
    measured: dict[str, np.ndarray],
    groups: list[tuple[str, np.ndarray]],
) -> np.ndarray:
    """Standard error of each group's log mean ratio, from its requests' spread."""
    out = []
    for k, g in groups:
        ratios = np.log(measured[k][g] / sim[k][g])
        spread = float(np.std(ratios, ddof=1)) if g.size > 1 else 1.0
        out.append(max(_MIN_SCALE, spread / np.sqrt(g.size)))
    return np.array(out)


def _map_loss(r: np.ndarray, w: np.ndarray, theta: np.ndarray) -> float:
    """Minus the log posterior (up to a constant)."""
    return float(np.sum(w * r**2) + np.sum(theta**2) / _PRIOR_SD**2)


_T = TypeVar("_T")


def damped_step(
    theta: np.ndarray,
    delta: np.ndarray,
    loss: float,
    evaluate: Callable[[np.ndarray], tuple[float, _T]],
) -> tuple[np.ndarray, _T, np.ndarray] | None:
    """A Gauss-Newton step from ``theta``, halved up to four times until ``evaluate``'s loss
    falls below ``loss``: (new theta, what evaluate gave there, the step taken), or None."""
    for _halving in range(4):
        value, result = evaluate(theta + delta)
        if math.isfinite(value) and value < loss:
            return theta + delta, result, delta
        delta = delta / 2.0
    return None


def fit_terms(
    config: ResolvedConfig, requests: Requests, *, group_size: int = GROUP_SIZE
) -> TermFit:
    """The posterior of the step terms given the measured requests (module docstring).

    Args:
        config: the prior; step terms it already carries are where the search starts, and
            they are replaced, not added to.
        requests: the measured requests.
        group_size: requests per residual; a run known only by its means (every request
            carries the run's mean) is fitted as one group per metric.
    """
    base = config.gpu.efficiency.step_terms
    sim = simulate(config, requests)
    units = _units(config, requests, sim)
    problem = _Problem(config, requests, units, group_size)
    theta = np.array([getattr(base, k) for k in TERMS]) / units
    measured = requests.measured
    k = len(TERMS)
    normal = np.eye(k) / _PRIOR_SD**2
    groups = problem.groups(sim)
    for _ in range(_MAX_ITERATIONS):
        groups = problem.groups(sim)
        if not groups:
            break
        y = problem.log_means(measured, groups)
        f = problem.log_means(sim.metrics(), groups)
        w = 1.0 / _group_sd(sim.metrics(), measured, groups) ** 2
        jac = np.empty((len(groups), k))
        for j in range(k):
            step = np.zeros(k)
            step[j] = _STEP
            moved = problem.simulate(theta + step).metrics()
            jac[:, j] = np.nan_to_num(problem.log_means(moved, groups) - f) / _STEP
        normal = jac.T @ (w[:, None] * jac) + np.eye(k) / _PRIOR_SD**2
        delta = np.linalg.solve(normal, jac.T @ (w * (y - f)) - theta / _PRIOR_SD**2)

        def evaluate(
            t: np.ndarray,
            y: np.ndarray = y,
            w: np.ndarray = w,
            groups: list[tuple[str, np.ndarray]] = groups,
        ) -> tuple[float, Simulated]:
            candidate = problem.simulate(t)
            r_new = y - problem.log_means(candidate.metrics(), groups)
            return _map_loss(r_new, w, t), candidate

        accepted = damped_step(theta, delta, _map_loss(y - f, w, theta), evaluate)
        if accepted is None:
            break
        theta, sim, delta = accepted
        if float(np.max(np.abs(delta))) < 0.01:
            break
    sd = np.sqrt(np.diag(np.linalg.inv(normal))) * units
    return TermFit(
        terms=_terms(theta, units),
        sd=StepTerms(*(float(f"{v:.3g}") for v in sd)),
        prior_sd=StepTerms(*(float(f"{v:.3g}") for v in units * _PRIOR_SD)),
        num_ttft=sum(g.size for key, g in groups if key == "ttft"),
        num_tpot=sum(g.size for key, g in groups if key == "tpot"),
        num_simulations=problem.num_simulations + 1,
    )
