"""slotune's sampler: a TPE-style density ratio scored over distinct configurations.

Why not Optuna's ``TPESampler`` as it is: engine spaces are small and discrete (powers of two,
booleans, a handful of thresholds), and every trial costs a full capacity search. TPE draws
its candidates from a kernel density around the best trials, so it keeps proposing
configurations already measured (a wasted trial each time), and the parameter that exists
only under a condition (``long_prefill_token_threshold`` with chunked prefill on) is sampled
apart from the rest. This sampler keeps TPE's model — good trials (the best feasible ones,
else the least violating) against the others, a kernel per parameter over its *positions*
for ordered values — but scores whole engine configurations, never proposes one the study
has already measured or is measuring, nor one the engine refuses at start-up
(:meth:`SearchSpace.invalid_reason`), and starts from engine knowledge instead of random
draws. First the token-budget ladder: the default with each smaller per-step token budget,
smallest first (the order of vLLM's ``auto_tune.sh``), until a step up does worse than the
one below it — a prefill chunk stalls every decode batched with it, so under latency SLOs the
best budget often lies far below the default, one change away. Then the model, with the
default and the ladder's trials as its first evidence: a tuned configuration usually differs
from the default in one or two parameters, and the good density's prior leans towards the
default, so the ratio's pull away
from the bad trials does not throw the search into the corners of the space. While nothing is
feasible, infeasible trials rank by SLO shortfall (the sum of their broken constraints, as in
Optuna's constrained samplers), the default prior is off (a default that breaks an SLO is no
neighbourhood to stay in) and a plateau of equal shortfalls counts as no evidence, so the
search moves away from it. ``benchmarks/tuner_efficiency.py`` measures the difference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from slotune.collector.errors import ConfigError
from slotune.collector.vocabulary import SamplerKind as SamplerKind
from slotune.tuner.engines.base import Knob
from slotune.tuner.engines.param import Param, ParamKind, Value
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.tune.space import SearchSpace

_CONSTRAINTS_KEY = "constraints"
_NOMINAL_MATCH = 0.8  # kernel mass on the same choice of an unordered parameter
# The good density's prior: half uniform, half a wide kernel at the engine default (4
# positions of an ordered parameter, 60 % on the default's choice of an unordered one).
_DEFAULT_PRIOR_SHARE = 0.5
_DEFAULT_PRIOR_WIDTH = 4.0
_DEFAULT_PRIOR_MATCH = 0.6
# While nothing is feasible, a shortfall above this share of the worst one is the plateau.
_PLATEAU = 0.9


def make_sampler(
    kind: SamplerKind | str,
    seed: int | None,
    space: SearchSpace,
    *,
    multi_objective: bool = False,
    forced_attr: str = "forced_params",
) -> optuna.samplers.BaseSampler:
    """The sampler of a study.

    Args:
        kind: which sampler.
        seed: its random seed.
        space: the study's space (slotune's own sampler proposes whole configurations of it).
        multi_objective: the study has two objectives (``pareto``).
        forced_attr: see :class:`DistinctTPESampler`.

    Raises:
        ConfigError: an unknown sampler name.
    """
    try:
        k = SamplerKind(kind)
    except ValueError as e:
        names = ", ".join(m.value for m in SamplerKind)
        raise ConfigError(f"--sampler {kind!r}: use one of {names}") from e
    if k is SamplerKind.TPE and not multi_objective:
        return DistinctTPESampler(space, seed=seed, forced_attr=forced_attr)
    if k in (SamplerKind.TPE, SamplerKind.OPTUNA_TPE):
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=5)
    if k is SamplerKind.GP:
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=5)
    return optuna.samplers.RandomSampler(seed=seed)


class _Recorder:
    """Stands in for an Optuna trial while drawing one random configuration."""

    def __init__(self, rng: np.random.Generator, fixed: Mapping[str, Value] | None = None):
        self.rng = rng
        self.fixed = fixed
        self.params: dict[str, Value] = {}

    def _take(self, name: str, draw: Any) -> Any:
        value: Value = self.fixed[name] if self.fixed is not None else draw()
        self.params[name] = value
        return value

    def suggest_categorical(self, name: str, choices: Sequence[Value]) -> Value:
        value: Value = self._take(name, lambda: choices[int(self.rng.integers(len(choices)))])
        return value

    def suggest_int(self, name: str, low: int, high: int, log: bool = False, step: int = 1) -> int:
        def draw() -> int:
            if log:
                return round(math.exp(self.rng.uniform(math.log(low), math.log(high))))
            return low + step * int(self.rng.integers((high - low) // step + 1))

        return int(self._take(name, draw))

    def suggest_float(
        self, name: str, low: float, high: float, log: bool = False, step: float | None = None
    ) -> float:
        def draw() -> float:
            if log:
                return math.exp(self.rng.uniform(math.log(low), math.log(high)))
            if step:
                return low + step * int(self.rng.integers(round((high - low) / step) + 1))
            return float(self.rng.uniform(low, high))

        return float(self._take(name, draw))


def _config_key(config: Mapping[str, Value]) -> tuple[tuple[str, Value], ...]:
    return tuple(sorted(config.items()))


class DistinctTPESampler(optuna.samplers.BaseSampler):
    """Density-ratio sampler over the distinct configurations of a :class:`SearchSpace`.

    Args:
        space: the study's search space (the sampler proposes whole configurations of it).
        seed: random seed.
        gamma: fraction of the trials that form the "good" group (at least one).
        n_candidates: random configurations scored per trial.
        forced_attr: the trial user attribute holding values passed to the engine outside the
            searched ranges (an engine default), so such a trial's configuration is known.
    """

    def __init__(
        self,
        space: SearchSpace,
        seed: int | None = None,
        *,
        gamma: float = 0.15,
        n_candidates: int = 1024,
        forced_attr: str = "forced_params",
    ) -> None:
        self._space = space
        self._forced_attr = forced_attr
        self._rng = np.random.default_rng(seed)
        self._gamma = gamma
        self._n_candidates = n_candidates
        self._searched = [p for p in space.params if p.kind is not ParamKind.FIXED]
        self._default = self._features(space.default_params())
        self._fallback = optuna.samplers.RandomSampler(seed=seed)
        self._ladder = self._token_ladder()

    @property
    def token_ladder(self) -> list[dict[str, Value]]:
        """The parameters of the ladder's configurations, in the order they are tried."""
        return [params for _, params in self._ladder]

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        self._fallback.reseed_rng()

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return {p.name: _distribution(p) for p in self._searched}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        trials = study.get_trials(deepcopy=False)
        measured = [t for t in trials if t.state is TrialState.COMPLETE]
        taken = {
            self._key_of(t)
            for t in trials
            if t.number != trial.number and t.state is not TrialState.FAIL
        }
        candidates = self._candidates(taken)
        if not candidates:
            return {}  # every configuration was measured: let the fallback repeat one
        if not measured:  # trial 0 still running (several workers): any valid configuration
            return candidates[int(self._rng.integers(len(candidates)))]
        walk = self._next_on_ladder(study, measured, taken)
        if walk is not None:
            return walk
        feats = np.array([self._features(c) for c in candidates])
        good, bad, any_feasible = self._split(study, measured)
        # Lean towards the engine default only once something is feasible: a default that
        # breaks an SLO is not a neighbourhood to stay in.
        prior = self._default_prior(feats) if any_feasible else np.ones(len(feats))
        score = self._log_density(feats, good, prior) - self._log_density(
            feats, bad, np.ones(len(feats))
        )
        best = np.flatnonzero(score >= score.max() - 1e-12)
        return candidates[int(self._rng.choice(best))]

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._fallback.sample_independent(study, trial, param_name, param_distribution)

    def _token_ladder(self) -> list[tuple[tuple[tuple[str, Value], ...], dict[str, Value]]]:
        """The default with each smaller per-step token budget, smallest first: (key, params).

        Engine knowledge, the order vLLM's ``auto_tune.sh`` walks: the token budget trades
        TTFT against every running request's inter-token latency (a long prefill chunk stalls
        the decodes batched with it), so under latency SLOs the best budget is often far
        below the default, and the search begins at the small end. Empty when the space does
        not search a budget or the default lies outside the searched ranges.
        """
        space = self._space
        adapter = adapter_for(space.engine)
        names = adapter.knob_names
        budget_name = names.get(Knob.TOKEN_BUDGET) if adapter.walks_token_budget else None
        chunked_name = names.get(Knob.CHUNKED_PREFILL)
        param = next((p for p in self._searched if p.name == budget_name), None)
        if param is None or param.kind is ParamKind.INT or space.forced_defaults():
            return []
        default = space.repair(dict(space.defaults))
        budget = default.get(param.name)
        if not isinstance(budget, int):
            return []
        # a budget below the context length needs chunked prefill (the repair rule says so)
        searched = {p.name for p in self._searched}
        chunking: dict[str, Value] = (
            {chunked_name: True} if chunked_name is not None and chunked_name in searched else {}
        )
        out = []
        for value in sorted(v for v in param.choices if isinstance(v, int) and v < budget):
            config = space.repair({**default, param.name: value})
            if config[param.name] != value:
                config = space.repair({**default, param.name: value, **chunking})
            if config[param.name] == value and not space.invalid_reason(config):
                out.append((_config_key(config), space.params_of(config)))
        return out

    def _next_on_ladder(
        self,
        study: optuna.Study,
        measured: list[FrozenTrial],
        taken: set[tuple[tuple[str, Value], ...]],
    ) -> dict[str, Value] | None:
        """The next budget of the ladder, until a step up the ladder did worse than the one
        below it (past the peak: the model takes over, with the ladder's trials as evidence)."""
        rank = _ranker(study)
        done = {self._key_of(t): rank(t) for t in measured}
        below: tuple[int, float] | None = None
        for key, params in self._ladder:
            if key in done:
                if below is not None and done[key] > below:
                    return None
                below = done[key]
            elif key not in taken:
                return params
        return None

    def _candidates(self, taken: set[tuple[tuple[str, Value], ...]]) -> list[dict[str, Value]]:
        out: dict[tuple[tuple[str, Value], ...], dict[str, Value]] = {}
        for _ in range(self._n_candidates):
            rec = _Recorder(self._rng)
            config = self._space.suggest(rec)  # type: ignore[arg-type]
            key = _config_key(config)
            if key not in taken and key not in out and not self._space.invalid_reason(config):
                out[key] = rec.params
        return list(out.values())

    def _key_of(self, t: FrozenTrial) -> tuple[tuple[str, Value], ...]:
        rec = _Recorder(self._rng, fixed=t.params)
        try:
            config = self._space.suggest(rec, t.user_attrs.get(self._forced_attr))  # type: ignore[arg-type]
        except KeyError:
            return (("trial", t.number),)  # parameters of another space: never equal
        return _config_key(config)

    def _split(
        self, study: optuna.Study, measured: list[FrozenTrial]
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        """Features of the good and the other trials, and whether any trial is feasible.

        Feasible trials rank by value; infeasible ones after them by SLO shortfall (the sum of
        their broken constraints), as Optuna's constrained samplers rank by violation. While
        nothing is feasible, only trials with a clearly smaller shortfall than the worst seen
        (by more than 10 %) are good: a plateau of about equal shortfalls (every configuration
        whose prefill chunks stall decodes alike; arrival noise moves them by a few percent)
        says nothing about where to go, and the search then moves away from it.
        """
        rank = _ranker(study)
        ordered = sorted(measured, key=rank)
        n_good = max(1, math.ceil(self._gamma * len(ordered)))
        any_feasible = rank(ordered[0])[0] == 0
        if not any_feasible:
            worst = _violation(ordered[-1])
            n_good = min(n_good, sum(_violation(t) < worst * _PLATEAU for t in ordered))
        feats = [self._features(t.params) for t in ordered]
        width = len(self._searched)
        return (
            np.array(feats[:n_good]).reshape(-1, width),
            np.array(feats[n_good:]).reshape(-1, width),
            any_feasible,
        )

    def _features(self, params: Mapping[str, Any]) -> list[float]:
        """Each searched parameter in [0, 1] (ordered) or as a choice index; NaN if absent."""
        out = []
        for p in self._searched:
            v = params.get(p.name)
            if v is None:
                out.append(math.nan)
            elif p.kind is ParamKind.CHOICE:
                out.append(float(p.choices.index(v)) if v in p.choices else math.nan)
            elif p.kind is ParamKind.ORDINAL:
                out.append(float(v) / max(1, len(p.choices) - 1))
            else:
                out.append(_unit(p, float(v)))
        return out

    def _default_prior(self, x: np.ndarray) -> np.ndarray:
        """Prior of the good density: without evidence, near the default beats a far corner.

        The ratio's repulsion from the bad trials otherwise sends the search to the corners
        of the space (16 sequences with a 512-token budget), which are rarely good engine
        configurations; the bad density keeps a uniform prior.
        """
        near = np.ones(len(x))
        for d, p in enumerate(self._searched):
            near *= _kernel(
                p, x[:, d], self._default[d], width=_DEFAULT_PRIOR_WIDTH, match=_DEFAULT_PRIOR_MATCH
            )
        return _DEFAULT_PRIOR_SHARE * near + (1 - _DEFAULT_PRIOR_SHARE)

    def _log_density(self, x: np.ndarray, points: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """log of a mixture: the prior (one point's worth) plus one product kernel per point."""
        total = prior.copy()
        for y in points:
            k = np.ones(len(x))
            for d, p in enumerate(self._searched):
                k *= _kernel(p, x[:, d], y[d])
            total += k
        return np.log(total / (len(points) + 1))


def _violation(t: FrozenTrial) -> float:
    return sum(max(0.0, c) for c in _constraints(t))


def _ranker(study: optuna.Study) -> Callable[[FrozenTrial], tuple[int, float]]:
    """Sort key of measured trials, best first: feasible ones by value, then the infeasible
    ones by SLO shortfall (the sum of their broken constraints)."""
    sign = -1.0 if study.direction is optuna.study.StudyDirection.MAXIMIZE else 1.0

    def rank(t: FrozenTrial) -> tuple[int, float]:
        v = _violation(t)
        if v > 0:
            return 1, v
        return 0, sign * float(t.value if t.value is not None else math.inf)

    return rank


def _kernel(
    p: Param, x: np.ndarray, y: float, *, width: float = 1.0, match: float = _NOMINAL_MATCH
) -> np.ndarray:
    """Density of ``x`` under a kernel at ``y`` relative to the uniform (1 = no preference).

    ``width``: bandwidth in positions of an ordered parameter; ``match``: mass on the same
    choice of an unordered one.
    """
    absent = np.isnan(x) | math.isnan(y)
    if p.kind is ParamKind.CHOICE:
        m = len(p.choices)
        k = np.where(x == y, match * m, (1 - match) * m / max(1, m - 1))
    else:
        levels = len(p.choices) if p.kind is ParamKind.ORDINAL else 8
        h = width / max(1, levels - 1)
        grid = np.linspace(0.0, 1.0, levels)
        norm = np.exp(-0.5 * ((grid[:, None] - grid[None, :]) / h) ** 2).sum(axis=0).mean()
        k = np.exp(-0.5 * ((x - y) / h) ** 2) * levels / norm
    return np.where(absent, 1.0, k)


def _unit(p: Param, v: float) -> float:
    assert p.low is not None and p.high is not None
    if p.log:
        return (math.log(v) - math.log(p.low)) / max(1e-12, math.log(p.high) - math.log(p.low))
    return (v - p.low) / max(1e-12, p.high - p.low)


def _distribution(p: Param) -> BaseDistribution:
    if p.kind is ParamKind.CHOICE:
        return optuna.distributions.CategoricalDistribution(list(p.choices))
    if p.kind is ParamKind.ORDINAL:
        return optuna.distributions.IntDistribution(0, len(p.choices) - 1)
    assert p.low is not None and p.high is not None
    if p.kind is ParamKind.INT:
        return optuna.distributions.IntDistribution(
            int(p.low), int(p.high), log=p.log, step=1 if p.log else int(p.step or 1)
        )
    return optuna.distributions.FloatDistribution(
        p.low, p.high, log=p.log, step=None if p.log else p.step
    )


def _constraints(t: FrozenTrial) -> list[float]:
    return [float(v) for k, v in t.system_attrs.items() if k.startswith(f"{_CONSTRAINTS_KEY}:")]
