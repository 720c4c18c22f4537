"""The tunable engines and their adapters: adding an engine is one line in ``_ADAPTERS``.

Adapter modules are imported on first use, so that importing the registry (the simulator's
core does) loads no engine, and an adapter may import the simulator's parts it builds on.
"""

from __future__ import annotations

import importlib
from functools import cache

from slotune.collector.errors import ConfigError
from slotune.collector.vocabulary import DEFAULT_ENGINE, Engine
from slotune.tuner.engines.base import EngineAdapter

__all__ = ["DEFAULT_ENGINE", "adapter_for", "adapters", "engine_names", "engines"]

# Engine -> the module whose ``ADAPTER`` serves it.
_ADAPTERS: dict[Engine, str] = {
    Engine.VLLM: "slotune.tuner.engines.vllm",
    Engine.TRTLLM: "slotune.tuner.engines.trtllm",
    Engine.SGLANG: "slotune.tuner.engines.sglang",
}


def engines() -> tuple[Engine, ...]:
    """The engines with an adapter, in registry order."""
    return tuple(_ADAPTERS)


def engine_names() -> str:
    """The registered engines for a message (``vllm, trtllm``)."""
    return ", ".join(e.value for e in _ADAPTERS)


@cache
def _load(engine: Engine) -> EngineAdapter:
    adapter = importlib.import_module(_ADAPTERS[engine]).ADAPTER
    if not isinstance(adapter, EngineAdapter) or adapter.engine is not engine:
        raise TypeError(f"{_ADAPTERS[engine]}.ADAPTER is not the EngineAdapter of {engine}")
    return adapter


def adapter_for(engine: Engine | str) -> EngineAdapter:
    """The adapter of ``engine`` (an :class:`Engine` or its value).

    Raises:
        ConfigError: not an engine slotune tunes.
    """
    try:
        known = Engine(engine)
    except ValueError:
        known = None
    if known is None or known not in _ADAPTERS:
        raise ConfigError(f"unknown engine {str(engine)!r}; use one of {engine_names()}")
    return _load(known)


def adapters() -> tuple[EngineAdapter, ...]:
    """Every registered adapter, in registry order."""
    return tuple(_load(e) for e in _ADAPTERS)
