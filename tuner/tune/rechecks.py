"""The re-check runs a study keeps: each re-measured configuration, and the default's repeats.

Both live on the study as user attributes (``robustness`` and ``default_repeats``), written
by :mod:`tuner.tune.robustness` and :mod:`tuner.tune.repeats` and read by :mod:`tuner.tune.report`. Seeds
are keys as Optuna stores them: strings (``"0"`` is the trial's own run).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import optuna

from slotune.tuner.engines.param import Value

ROBUSTNESS_ATTR = "robustness"
DEFAULT_REPEATS_ATTR = "default_repeats"


@dataclass(frozen=True, slots=True)
class Recheck:
    """One configuration measured again with other seeds.

    Attributes:
        number: the trial that first measured it.
        params, config: its parameters as the engine got them, and everything it ran with.
        values_by_seed: the objective value of each run, by seed.
        worst_value: the lowest of them, the value that counts.
        feasible: whether every run met every SLO.
    """

    number: int
    params: dict[str, Value]
    config: dict[str, Value]
    values_by_seed: dict[str, float]
    worst_value: float
    feasible: bool

    def with_run(self, seed: int, value: float, feasible: bool) -> Recheck:
        """The re-check with one more run."""
        values = {**self.values_by_seed, str(seed): value}
        return replace(
            self,
            values_by_seed=values,
            worst_value=min(values.values()),
            feasible=self.feasible and feasible,
        )

    def to_attrs(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "params": dict(self.params),
            "config": dict(self.config),
            "values_by_seed": dict(self.values_by_seed),
            "worst_value": self.worst_value,
            "feasible": self.feasible,
        }

    @classmethod
    def from_attrs(cls, d: Mapping[str, Any]) -> Recheck:
        return cls(
            number=int(d["number"]),
            params=dict(d["params"]),
            config=dict(d["config"]),
            values_by_seed={str(k): float(v) for k, v in d["values_by_seed"].items()},
            worst_value=float(d["worst_value"]),
            feasible=bool(d["feasible"]),
        )


@dataclass(frozen=True, slots=True)
class DefaultRepeats:
    """The default configuration measured with the re-checked best's seeds, and more."""

    number: int
    values_by_seed: dict[str, float]
    extra_rounds: int

    def to_attrs(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "values_by_seed": dict(self.values_by_seed),
            "extra_rounds": self.extra_rounds,
        }

    @classmethod
    def from_attrs(cls, d: Mapping[str, Any]) -> DefaultRepeats:
        return cls(
            number=int(d["number"]),
            values_by_seed={str(k): float(v) for k, v in d["values_by_seed"].items()},
            extra_rounds=int(d.get("extra_rounds", 0)),
        )


def stored_rechecks(study: optuna.Study) -> tuple[Recheck, ...]:
    """The study's re-checks, best original value first (none before the re-check ran)."""
    return tuple(Recheck.from_attrs(r) for r in study.user_attrs.get(ROBUSTNESS_ATTR) or ())


def store_rechecks(study: optuna.Study, rechecks: tuple[Recheck, ...]) -> None:
    study.set_user_attr(ROBUSTNESS_ATTR, [r.to_attrs() for r in rechecks])


def stored_default_repeats(study: optuna.Study) -> DefaultRepeats | None:
    """The default's repeats, None when they were not run."""
    stored = study.user_attrs.get(DEFAULT_REPEATS_ATTR)
    return DefaultRepeats.from_attrs(stored) if stored else None
