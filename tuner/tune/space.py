"""Search spaces over engine parameters, under the engines' own names.

A space is a tuple of :class:`Param`. Each parameter is one of: an integer or float range
(optionally on a log scale), an ordered list of choices (powers of two are choices, so the
sampler only ever proposes values the engine would be given), a boolean, or a fixed value.
A parameter may be *conditional*: ``long_prefill_token_threshold`` exists only when
``enable_chunked_prefill`` is on, so it is neither sampled nor exported otherwise.

Structural rules are not conditions but repairs, stated by each engine's adapter: vLLM refuses
to start when chunked prefill is off and ``max_num_batched_tokens < max_model_len``; the sampled
value is then raised to ``max_model_len`` in the configuration (the trial's ``config`` records
what the engine got).

Spaces are narrowed or extended by a YAML file (see :func:`load_space_file`) or by
``NAME=SPEC`` strings (:func:`parse_param_override`)::

    max_num_seqs: [64, 128, 256]          # choices
    gpu_memory_utilization: {low: 0.85, high: 0.95, step: 0.01}
    max_num_batched_tokens: {low: 1024, high: 16384, power_of_two: true}
    tensor_parallel_size: 4               # fixed
    block_size: null                      # removed from the search (engine default)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slotune.collector.errors import ConfigError
from slotune.collector.textfile import read_text
from slotune.collector.vocabulary import Engine
from slotune.collector.yamlfile import read_yaml
from slotune.tuner.engines.param import Param, ParamKind, Value, choice, powers_of_two
from slotune.tuner.engines.registry import adapter_for

if TYPE_CHECKING:
    import optuna


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """The parameters a study searches, plus the engine's defaults for everything else.

    Attributes:
        engine: which engine's names these are.
        params: searched (and fixed) parameters, in sampling order (conditions point backwards).
        defaults: the engine's default configuration; trial 0 runs exactly this.
        max_model_len: context length the engine is started with (for the repair rule).
    """

    engine: Engine
    params: tuple[Param, ...]
    defaults: dict[str, Value] = field(default_factory=dict)
    max_model_len: int = 8192

    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def suggest(
        self, trial: optuna.Trial, forced: Mapping[str, Value] | None = None
    ) -> dict[str, Value]:
        """Sample a full engine configuration through ``trial``.

        Args:
            trial: the Optuna trial.
            forced: values taken as they are, without becoming Optuna parameters (an engine
                default outside a narrowed range: Optuna cannot fix a categorical to it).
        """
        forced = forced or {}
        config = dict(self.defaults)
        for p in self.params:
            if not p.is_active(config):
                config.pop(p.name, None)
            elif p.name in forced:
                config[p.name] = forced[p.name]
            else:
                config[p.name] = p.suggest(trial)
        return self.repair(config)

    def repair(self, config: dict[str, Value]) -> dict[str, Value]:
        """Apply the engine's structural rules to a sampled configuration."""
        return adapter_for(self.engine).repair(config, self.max_model_len)

    def invalid_reason(self, config: Mapping[str, Value]) -> str | None:
        """Why the engine refuses ``config`` when it parses its arguments, else None.

        Only rules the engine checks before touching a GPU (vLLM's ``SchedulerConfig``), so a
        study need not spend an engine launch to learn them.
        """
        return adapter_for(self.engine).invalid_reason(config)

    def default_params(self) -> dict[str, Value]:
        """Trial-0 parameters: the engine defaults that lie inside the searched ranges."""
        return {
            k: self._param(k).optuna_value(v)
            for k, v in self._defaults_of_searched().items()
            if self._param(k).contains(v)
        }

    def forced_defaults(self) -> dict[str, Value]:
        """Engine defaults outside the searched ranges (trial 0 passes them as ``forced``)."""
        return {
            k: v for k, v in self._defaults_of_searched().items() if not self._param(k).contains(v)
        }

    def _defaults_of_searched(self) -> dict[str, Value]:
        return {
            p.name: self.defaults[p.name]
            for p in self.params
            if p.kind is not ParamKind.FIXED
            and p.is_active(self.defaults)
            and p.name in self.defaults
        }

    def _param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    def grid(self) -> list[dict[str, Value]]:
        """Every configuration of the discretised space (conditions respected, deduplicated)."""
        configs: list[dict[str, Value]] = [dict(self.defaults)]
        for p in self.params:
            nxt: list[dict[str, Value]] = []
            for c in configs:
                if not p.is_active(c):
                    c = {k: v for k, v in c.items() if k != p.name}
                    nxt.append(c)
                    continue
                nxt.extend({**c, p.name: v} for v in p.grid_values())
            configs = nxt
        seen: set[tuple[tuple[str, Value], ...]] = set()
        out = []
        for c in configs:
            c = self.repair(dict(c))
            key = tuple(sorted(c.items()))
            if key not in seen:
                seen.add(key)
                out.append(c)
        return out

    def params_of(self, config: Mapping[str, Value]) -> dict[str, Value]:
        """The Optuna parameters that reproduce ``config`` (for enqueueing)."""
        return {
            p.name: p.optuna_value(config[p.name])
            for p in self.params
            if p.kind is not ParamKind.FIXED
            and p.name in config
            and p.is_active(config)
            and p.contains(config[p.name])
        }

    def engine_values(self, params: Mapping[str, Value]) -> dict[str, Value]:
        """The engine values of Optuna parameters (an ordered choice is stored as its index)."""
        by_name = {p.name: p for p in self.params}
        out: dict[str, Value] = {}
        for name, v in params.items():
            p = by_name.get(name)
            ordinal = p is not None and p.kind is ParamKind.ORDINAL
            out[name] = p.choices[int(v)] if p is not None and ordinal else v
        return out

    def with_overrides(self, overrides: Mapping[str, Any]) -> SearchSpace:
        """Narrow, fix, remove or add parameters (the YAML file / ``--param`` forms)."""
        params = {p.name: p for p in self.params}
        defaults = dict(self.defaults)
        for name, spec in overrides.items():
            if spec is None:
                params.pop(name, None)
                continue
            base = params.get(name)
            params[name] = _param_from_spec(name, spec, base)
            if params[name].kind is ParamKind.FIXED:
                defaults[name] = params[name].choices[0]
        max_model_len = int(defaults.get("max_model_len", self.max_model_len))
        return replace(
            self, params=tuple(params.values()), defaults=defaults, max_model_len=max_model_len
        )


def canonical_overrides(engine: Engine, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` with every parameter under its canonical name (``tp_size`` ->
    ``tensor_parallel_size``).

    Raises:
        ConfigError: one parameter given under two of its names.
    """
    aliases = adapter_for(engine).param_aliases
    out: dict[str, Any] = {}
    for name, spec in overrides.items():
        canonical = aliases.get(name, name)
        if canonical in out:
            raise ConfigError(f"--param {name}: {canonical} is already given; give it once")
        out[canonical] = spec
    return out


def space_overrides(
    engine: Engine, space_file: str | Path | None, params: Sequence[str]
) -> dict[str, Any]:
    """The search-space overrides of a study: the ``--space`` file, then each ``--param``."""
    overrides: dict[str, Any] = dict(load_space_file(space_file)) if space_file else {}
    overrides.update(parse_param_override(p) for p in params)
    return canonical_overrides(engine, overrides)


def check_overrides(
    engine: Engine, overrides: Mapping[str, Any], defaults: Mapping[str, Value]
) -> None:
    """Refuse a parameter the engine does not have, or a value of the wrong type for it.

    Args:
        engine: whose parameters.
        overrides: canonical overrides (:func:`canonical_overrides`).
        defaults: the engine's resolved defaults (:func:`engine_defaults`); their keys are the
            parameters it has, their types the types it takes.

    Raises:
        ConfigError: naming the parameter and what it takes.
    """
    for name, spec in overrides.items():
        if name not in defaults:
            known = ", ".join(sorted(defaults))
            raise ConfigError(f"--param {name}: not a {engine} parameter; known: {known}")
        if spec is None:
            continue
        values: list[Any]
        if isinstance(spec, list):
            values = spec
        elif isinstance(spec, Mapping):
            values = [spec[k] for k in ("low", "high") if k in spec]
        else:
            values = [spec]
        for v in values:
            if not _same_type(v, defaults[name]):
                raise ConfigError(
                    f"--param {name}: {v!r} is not {_type_words(defaults[name])} "
                    f"(the engine default is {defaults[name]!r})"
                )


def _same_type(value: Any, default: Value) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, int):
        return isinstance(value, int)
    if isinstance(default, float):
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, str)


def _type_words(default: Value) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int):
        return "an integer"
    if isinstance(default, float):
        return "a finite number"
    return "a name"


def _param_from_spec(name: str, spec: Any, base: Param | None) -> Param:
    requires = base.requires if base else ()
    where = f"search-space entry {name!r}"
    if isinstance(spec, list):
        if not spec:
            raise ConfigError(f"{where}: an empty list of choices; give at least one value")
        return choice(name, spec, requires=dict(requires))
    if isinstance(spec, bool | int | float | str):
        return Param(name, ParamKind.FIXED, choices=(spec,), requires=requires)
    if not isinstance(spec, Mapping):
        raise ConfigError(
            f"{where}: expected a value, a list of choices or a mapping "
            f"with low/high, got {type(spec).__name__}"
        )
    unknown = set(spec) - {"low", "high", "log", "step", "power_of_two", "requires", "grid"}
    if unknown:
        raise ConfigError(
            f"{where}: unknown keys {sorted(unknown)}; use low, high, log, step, "
            "power_of_two, requires, grid"
        )
    if "requires" in spec:
        requires = tuple(dict(spec["requires"]).items())
    try:
        low, high = spec["low"], spec["high"]
    except KeyError as e:
        raise ConfigError(f"{where}: a range needs both 'low' and 'high'") from e
    if not (isinstance(low, int | float) and isinstance(high, int | float)) or low > high:
        raise ConfigError(
            f"{where}: low ({low}) and high ({high}) must be numbers with low <= high"
        )
    if spec.get("power_of_two"):
        return Param(
            name, ParamKind.ORDINAL, choices=powers_of_two(int(low), int(high)), requires=requires
        )
    is_int = (
        isinstance(low, int) and isinstance(high, int) and not isinstance(spec.get("step"), float)
    )
    grid = tuple(spec.get("grid", ()))
    return Param(
        name,
        ParamKind.INT if is_int else ParamKind.FLOAT,
        low=low,
        high=high,
        log=bool(spec.get("log", False)),
        step=spec.get("step"),
        requires=requires,
        grid=grid,
    )


def parse_param_override(text: str) -> tuple[str, Any]:
    """Parse ``NAME=SPEC`` from the command line.

    Forms: ``max_num_seqs=64,128,256`` (choices), ``gpu_memory_utilization=0.85..0.95``
    (range), ``max_num_batched_tokens=1024..16384:pow2`` (powers of two),
    ``tensor_parallel_size=4`` (fixed), ``block_size=-`` (removed from the search).
    """
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name or not spec:
        raise ConfigError(
            f"--param {text!r}: expected NAME=SPEC, e.g. max_num_seqs=64,128,256 "
            "or gpu_memory_utilization=0.85..0.95"
        )
    spec = spec.strip()
    if spec == "-":
        return name, None
    if ".." in spec:
        rng, _, flag = spec.partition(":")
        lo, _, hi = rng.partition("..")
        low, high = _scalar(lo), _scalar(hi)
        out: dict[str, Any] = {"low": low, "high": high}
        if flag == "pow2":
            out["power_of_two"] = True
        elif flag == "log":
            out["log"] = True
        elif flag:
            raise ConfigError(f"--param {text!r}: unknown range flag {flag!r}; use :pow2 or :log")
        return name, out
    if "," in spec:
        return name, [_scalar(v) for v in spec.split(",")]
    return name, _scalar(spec)


def _scalar(text: str) -> Value:
    t = text.strip()
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return t


def load_space_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML search-space file: a mapping of parameter name -> spec (module docstring)."""
    text = read_text(path, "search-space file (--space)", ConfigError)
    data, _ = read_yaml(text, source=f"--space {path}", error=ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(
            f"--space {path}: expected a mapping of parameter name -> range, choices or value"
        )
    return data


def engine_defaults(
    engine: Engine | str, model: str, gpu: str, *, max_model_len: int
) -> dict[str, Value]:
    """The engine's own defaults for this model and GPU (as ``vllm serve`` / ``trtllm-serve``
    would resolve them), with the context length the study starts engines with."""
    adapter = adapter_for(_engine(engine))
    resolved = adapter.resolve(
        adapter.config_from_params(model, gpu, {adapter.length_param: max_model_len})
    )
    return {k: v for k, v in resolved.to_dict().items() if k not in ("engine", "model", "gpu")}


def default_space(
    engine: Engine | str, defaults: Mapping[str, Value], *, max_model_len: int
) -> SearchSpace:
    """The built-in space of an engine.

    Args:
        engine: an engine with an adapter.
        defaults: the engine's default configuration (:func:`engine_defaults`); parameters
            outside the space keep these values.
        max_model_len: the context length the engine is started with.
    """
    eng = _engine(engine)
    adapter = adapter_for(eng)
    params = adapter.default_params()
    searched = {p.name for p in params}
    kept = {k: v for k, v in defaults.items() if k in searched or k in adapter.fixed_params}
    return SearchSpace(eng, params, kept, max_model_len)


def _engine(engine: Engine | str) -> Engine:
    try:
        return adapter_for(engine).engine
    except ConfigError as e:
        raise ConfigError(f"--engine {engine!r}: {e}") from e
