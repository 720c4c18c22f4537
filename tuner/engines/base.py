"""What a tunable engine adapter provides: the one place an engine's specifics live.

An adapter (one module per engine, registered by one line in :mod:`.registry`) is a
subclass of :class:`EngineAdapter` and holds everything the rest of slotune must not
spell out: the engine's configuration (:class:`EngineConfig` / :class:`ResolvedConfig`
subclasses with the engine's own parameter names, defaults and validation), its flags and
their argv rendering, its launch command, its default search space and parameter aliases,
its export format, and the neutral :class:`SimView` the simulator runs on. Outside the
adapters, code asks the adapter (``adapter_for(config.engine)``) and reads the view; it
never compares engines.

An adapter must provide (abstract methods and class attributes below):

- identity: ``engine`` (the :class:`Engine` member), ``label`` (the engine's own name as
  its users write it), ``config_type`` (its :class:`EngineConfig` dataclass);
- configuration: :meth:`~EngineAdapter.config_from_params` (parameters by the engine's
  names, aliases accepted), :meth:`~EngineAdapter.resolve` (defaults for a GPU and model,
  validation worded like the engine, raising ``EngineConfigError``);
- flags: :meth:`~EngineAdapter.parse_flags`, :meth:`~EngineAdapter.to_argv`,
  :meth:`~EngineAdapter.launch_command`, :meth:`~EngineAdapter.launch_files` and
  ``flags_help``; ``to_argv(parse_flags(argv))`` reproduces the settings of ``argv``;
- search: :meth:`~EngineAdapter.default_params`, ``param_aliases`` (other spellings ->
  canonical name), ``length_param`` (its context-length parameter), ``fixed_params`` (kept
  from the defaults but not searched) and the optional hooks
  :meth:`~EngineAdapter.repair` and :meth:`~EngineAdapter.invalid_reason`;
- export: :meth:`~EngineAdapter.export` (the exact command, and any file it reads);
- simulation: :meth:`~EngineAdapter.kv_capacity`, :meth:`~EngineAdapter.sim_view`,
  :meth:`~EngineAdapter.scheduler`, :meth:`~EngineAdapter.host_step_s`,
  :meth:`~EngineAdapter.kv_log_lines`, ``kv_room_knobs``, and the optional hook
  :meth:`~EngineAdapter.check_request`;
- diagnosis: ``knob_names`` (the engine's parameter for each neutral :class:`Knob`; every
  adapter has the first seven) and :meth:`~EngineAdapter.knob_params` where setting a knob
  is more than giving its parameter a value.

``tests/tuner/engines/test_adapter_contract.py`` runs one suite over every registered
adapter; a new adapter passes it before it is done.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from slotune.collector.errors import ConfigError
from slotune.collector.vocabulary import Engine
from slotune.tuner.engines.param import Param, Value
from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.catalog import GPU, ModelSpec
from slotune.tuner.sim.cost_coeffs import OverheadKnobs
from slotune.tuner.sim.memory import KvBudget, KvCapacity
from slotune.tuner.sim.request import SimRequest
from slotune.tuner.sim.scheduler import Scheduler
from slotune.tuner.sim.view import SimView


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Base of an engine's settings as the user gave them (None = the engine's default).

    Subclasses are frozen, slotted dataclasses whose further fields are the engine's own
    parameter names, and set ``engine`` as a class variable.
    """

    engine: ClassVar[Engine]
    model: str
    gpu: str


@dataclass(frozen=True, slots=True)
class ResolvedConfig(ABC):
    """Base of an engine's settings with every default filled in and validated."""

    engine: ClassVar[Engine]
    model: ModelSpec
    gpu: GPU

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """Parameters by the engine's own names, plus ``engine``, ``model`` and ``gpu`` ids.

        These names are those :meth:`EngineAdapter.config_from_params` takes back.
        """


class Knob(StrEnum):
    """Engine parameters by what they do, for advice that holds for every engine."""

    MAX_RUNNING = "max_running"
    TOKEN_BUDGET = "token_budget"
    CHUNKED_PREFILL = "chunked_prefill"
    PREFIX_CACHE = "prefix_cache"
    MEMORY_FRACTION = "memory_fraction"
    MAX_LEN = "max_len"
    TENSOR_PARALLEL = "tensor_parallel"
    BLOCK_SIZE = "block_size"
    EAGER = "eager"


_T = TypeVar("_T")


def fields_from_params(
    engine: Engine, params: Mapping[str, Any], fields_by_name: Mapping[str, str]
) -> dict[str, Any]:
    """Config-field keyword arguments from parameters by the engine's own names.

    Args:
        engine: whose parameters, for the message.
        params: parameter name -> value.
        fields_by_name: every name the engine takes (aliases included) -> its config field.

    Raises:
        ConfigError: a name the engine (as simulated) does not have, listing the known ones.
    """
    kwargs: dict[str, Any] = {}
    for key, value in params.items():
        field = fields_by_name.get(key)
        if field is None:
            raise ConfigError(
                f"{key!r} is not a {engine} parameter the simulator knows; "
                f"known: {', '.join(fields_by_name)}"
            )
        kwargs[field] = value
    return kwargs


def narrow(value: EngineConfig | ResolvedConfig, cls: type[_T]) -> _T:
    """``value`` as the adapter's own config class ``cls``.

    Raises:
        ConfigError: ``value`` is another engine's (callers pick the adapter by its engine).
    """
    if not isinstance(value, cls):
        raise ConfigError(
            f"expected a {cls.__name__}, got a {type(value).__name__} for {value.engine}; "
            "pick the adapter with adapter_for(config.engine)"
        )
    return value


class EngineAdapter(ABC):
    """One tunable engine (see the module docstring for what a subclass provides)."""

    engine: ClassVar[Engine]
    label: ClassVar[str]
    """The engine's name as its users write it (``vLLM``)."""
    config_type: ClassVar[type[EngineConfig]]
    flags_help: ClassVar[str]
    """One paragraph naming the flags :meth:`parse_flags` takes."""
    param_aliases: ClassVar[Mapping[str, str]] = {}
    """Other spellings of a parameter -> its canonical name (a study keeps the canonical)."""
    length_param: ClassVar[str]
    """The context-length parameter (``max_model_len``)."""
    fixed_params: ClassVar[tuple[str, ...]] = ()
    """Parameters a default space keeps at their default without searching them."""
    knob_names: ClassVar[Mapping[Knob, str]]
    """The engine's parameter for each :class:`Knob` it has."""
    kv_room_knobs: ClassVar[str]
    """What to turn when the KV cache holds too few requests (``raise X or lower Y``)."""
    export_language: ClassVar[str] = "bash"
    """The language :meth:`export`'s text is in, for highlighting (``bash``, ``yaml``)."""
    walks_token_budget: ClassVar[bool] = True
    """Whether slotune's sampler starts by walking the token budget (``knob_names``'
    ``TOKEN_BUDGET``) down from the default, the order vLLM's ``auto_tune.sh`` takes."""
    kv_budget: ClassVar[KvBudget | None] = None
    """The rule :func:`tuner.sim.memory.kv_capacity` sizes the cache by for this engine;
    None when the adapter's :meth:`kv_capacity` sizes it another way."""

    def knob_params(self, knob: Knob, value: Value) -> dict[str, Value]:
        """The parameters that set ``knob`` to ``value`` (True / False for an on-off knob).

        By default ``{knob_names[knob]: value}``; an engine whose parameter says the opposite
        (a ``disable_`` flag) or turns a feature off by a value overrides this.

        Raises:
            KeyError: the engine has no such knob.
        """
        return {self.knob_names[knob]: value}

    # configuration
    @abstractmethod
    def config_from_params(self, model: str, gpu: str, params: Mapping[str, Any]) -> EngineConfig:
        """A config from parameters named as the engine names them (aliases accepted).

        Raises:
            ConfigError: a parameter the engine (as simulated) does not have.
        """

    @abstractmethod
    def resolve(self, config: EngineConfig) -> ResolvedConfig:
        """The engine's defaults for this GPU and model, validated like the engine.

        Raises:
            ConfigError: unknown GPU or model id.
            EngineConfigError: a combination the engine refuses at start.
        """

    # flags and launch
    @abstractmethod
    def parse_flags(
        self, argv: Sequence[str], *, model: str | None = None, gpu: str | None = None
    ) -> EngineConfig:
        """The engine's command-line flags (plus slotune's ``--gpu``) into a config.

        Raises:
            ConfigError: unknown flag, bad value, missing model or GPU, worded like the engine.
        """

    @abstractmethod
    def to_argv(self, config: EngineConfig, *, options_path: str | None = None) -> list[str]:
        """The flags that reproduce ``config``: only what it sets, model and GPU not included.

        Args:
            config: the settings.
            options_path: where :meth:`launch_files`' file lies, for engines that read some
                settings from a file.

        Raises:
            ConfigError: the settings need a file and no ``options_path`` was given.
        """

    @abstractmethod
    def launch_command(self, config: EngineConfig, *, options_path: str) -> list[str]:
        """The real engine's launch command for ``config`` (model by its Hugging Face name)."""

    def check_command(self, argv: Sequence[str]) -> None:
        """Refuse, before anything starts, what the release of this engine installed here
        would refuse in ``argv``, when ``argv`` runs this engine; nothing to check by default.

        Raises:
            EngineConfigError: in the engine's words.
        """
        return None

    def launch_files(self, config: EngineConfig) -> dict[str, Any]:
        """The content of the options file the launch command reads; empty when none."""
        return {}

    # search space
    @abstractmethod
    def default_params(self) -> tuple[Param, ...]:
        """The built-in search space, in sampling order (conditions point backwards)."""

    def repair(self, config: dict[str, Value], max_len: int) -> dict[str, Value]:
        """Apply the engine's structural rules to a sampled configuration (in place)."""
        return config

    def invalid_reason(self, config: Mapping[str, Value]) -> str | None:
        """Why the engine refuses ``config`` while parsing its arguments (before any GPU)."""
        return None

    # export
    @abstractmethod
    def export(self, config: EngineConfig) -> str:
        """The exact launch command (and any file it reads) that deploys ``config``."""

    # simulation
    @abstractmethod
    def kv_capacity(self, resolved: ResolvedConfig) -> KvCapacity:
        """The KV cache the engine allocates at start, per tensor-parallel rank.

        Raises:
            EngineConfigError: the engine would not start (weights or KV do not fit).
        """

    @abstractmethod
    def sim_view(self, resolved: ResolvedConfig, capacity: KvCapacity) -> SimView:
        """The neutral view of ``resolved`` with a KV cache of ``capacity``."""

    @abstractmethod
    def scheduler(
        self, resolved: ResolvedConfig, view: SimView, block_manager: BlockManager
    ) -> Scheduler:
        """The engine's scheduler over ``block_manager``."""

    @abstractmethod
    def host_step_s(self, overhead: OverheadKnobs) -> float:
        """The engine's fixed host time per scheduler step."""

    @abstractmethod
    def kv_log_lines(self, capacity: KvCapacity, max_len: int) -> list[str]:
        """The lines the engine logs about its KV cache at start."""

    def check_request(
        self, resolved: ResolvedConfig, capacity: KvCapacity, request: SimRequest
    ) -> None:
        """Refuse a request the engine refuses beyond the common context-length check.

        Raises:
            RequestRejected: worded like the engine's HTTP 400.
        """
        return None
