"""A tunable engine parameter: its kind, range or choices, and the conditions it exists under.

Each engine's adapter declares its parameters with these; the tuner's search space
(:mod:`slotune.tuner.tune.space`) narrows, extends and samples them. Nothing here imports the
rest of the tuner, so the adapters and the search space can both stand on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna


class ParamKind(StrEnum):
    INT = "int"
    FLOAT = "float"
    ORDINAL = "ordinal"  # ordered numeric choices (powers of two): sampled by position
    CHOICE = "choice"  # unordered choices (booleans, policies)
    FIXED = "fixed"


Value = int | float | bool | str


@dataclass(frozen=True, slots=True)
class Param:
    """One tunable engine parameter.

    Attributes:
        name: the engine's own parameter name (dotted for nested TensorRT-LLM options).
        kind: how it is sampled.
        low, high: range bounds (INT / FLOAT).
        log: sample the range on a log scale.
        step: grid step of the range (FLOAT: required for the exhaustive grid).
        choices: the values (ORDINAL: ascending; CHOICE), or the single value (FIXED).
        requires: ``(name, value)`` pairs that must hold for the parameter to exist.
        grid: values the exhaustive grid visits (default: all choices, or 4 range points).
    """

    name: str
    kind: ParamKind
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Value, ...] = ()
    requires: tuple[tuple[str, Value], ...] = ()
    grid: tuple[Value, ...] = ()

    def is_active(self, config: Mapping[str, Value]) -> bool:
        return all(config.get(k) == v for k, v in self.requires)

    def contains(self, value: Value) -> bool:
        """Whether the sampler could propose ``value`` (Optuna can fix a trial only to those)."""
        if self.kind in (ParamKind.FIXED, ParamKind.CHOICE, ParamKind.ORDINAL):
            return value in self.choices
        assert self.low is not None and self.high is not None
        return isinstance(value, int | float) and self.low <= value <= self.high

    def suggest(self, trial: optuna.Trial) -> Value:
        if self.kind is ParamKind.FIXED:
            return self.choices[0]
        if self.kind is ParamKind.CHOICE:
            value = trial.suggest_categorical(self.name, list(self.choices))
            assert value is not None  # None is never among the choices
            return value
        if self.kind is ParamKind.ORDINAL:
            # By position, so the sampler sees 256 between 128 and 512 (a categorical
            # would treat them as unrelated; benchmarks/tuner_efficiency.py measures it).
            return self.choices[trial.suggest_int(self.name, 0, len(self.choices) - 1)]
        assert self.low is not None and self.high is not None  # guaranteed by _check
        if self.kind is ParamKind.INT:
            return trial.suggest_int(
                self.name, int(self.low), int(self.high), log=self.log, step=int(self.step or 1)
            )
        value = trial.suggest_float(
            self.name, self.low, self.high, log=self.log, step=None if self.log else self.step
        )
        # A stepped float comes back as low + k * step with binary noise (0.8600000000000001);
        # the engine should be given the decimal the step implies.
        return round(value, _decimals(self.step)) if self.step and not self.log else value

    def optuna_value(self, value: Value) -> Value:
        """The Optuna parameter value that makes :meth:`suggest` return ``value``."""
        return self.choices.index(value) if self.kind is ParamKind.ORDINAL else value

    def grid_values(self) -> tuple[Value, ...]:
        if self.grid:
            return self.grid
        if self.kind in (ParamKind.FIXED, ParamKind.CHOICE, ParamKind.ORDINAL):
            return self.choices
        assert self.low is not None and self.high is not None
        points = [self.low + (self.high - self.low) * i / 3 for i in range(4)]
        if self.kind is ParamKind.INT:
            return tuple(sorted({round(p) for p in points}))
        return tuple(round(p, 4) for p in points)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind.value}
        if self.kind in (ParamKind.INT, ParamKind.FLOAT):
            out.update(low=self.low, high=self.high, log=self.log, step=self.step)
        else:
            out["choices"] = list(self.choices)
        if self.requires:
            out["requires"] = dict(self.requires)
        return out


def _decimals(step: float) -> int:
    return max(0, -math.floor(math.log10(step))) + 1


def choice(
    name: str, values: Sequence[Value], *, requires: Mapping[str, Value] | None = None
) -> Param:
    """Choices: ORDINAL (sorted) when they are all numbers, else CHOICE."""
    return _choices(name, values, tuple((requires or {}).items()))


def _choices(name: str, values: Sequence[Value], requires: tuple[tuple[str, Value], ...]) -> Param:
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    if numeric and len(set(values)) == len(values):
        return Param(name, ParamKind.ORDINAL, choices=tuple(sorted(values)), requires=requires)
    return Param(name, ParamKind.CHOICE, choices=tuple(values), requires=requires)


def powers_of_two(low: int, high: int) -> tuple[int, ...]:
    return tuple(2**k for k in range(int(math.log2(low)), int(math.log2(high)) + 1))
