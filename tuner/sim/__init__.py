"""The engine simulator: each engine's scheduler mirror priced by a cost model.

Public surface: engine configs by the engines' own parameter names, the flag parser and
launch-command export, the engine core the emulated HTTP engine drives, and
:func:`simulate` for offline trace replay. Names are imported on first use (PEP 562): the
engine adapters (``tuner.engines``) build on this package's modules, so importing one of
those must not import every adapter through here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slotune.collector.run_figures import StepBreakdown
    from slotune.tuner.engines.base import EngineConfig, ResolvedConfig
    from slotune.tuner.engines.trtllm import TRTLLM_FLAGS_HELP, ResolvedTrtllm, TrtllmConfig
    from slotune.tuner.engines.vllm import VLLM_FLAGS_HELP, ResolvedVllm, VllmConfig
    from slotune.tuner.sim.config import Engine, config_from_params, resolve
    from slotune.tuner.sim.engine import EngineCore, EngineStats, StepResult
    from slotune.tuner.sim.flags import (
        extra_llm_api_options,
        launch_command,
        parse_engine_flags,
        to_argv,
    )
    from slotune.tuner.sim.request import RequestRejected, SimRequest
    from slotune.tuner.sim.results import EngineSeries, RequestTiming, SimResult
    from slotune.tuner.sim.simulator import simulate, trace_requests

# public name -> module
_LAZY = {
    "StepBreakdown": "slotune.collector.run_figures",
    "EngineConfig": "slotune.tuner.engines.base",
    "ResolvedConfig": "slotune.tuner.engines.base",
    "TRTLLM_FLAGS_HELP": "slotune.tuner.engines.trtllm",
    "ResolvedTrtllm": "slotune.tuner.engines.trtllm",
    "TrtllmConfig": "slotune.tuner.engines.trtllm",
    "VLLM_FLAGS_HELP": "slotune.tuner.engines.vllm",
    "ResolvedVllm": "slotune.tuner.engines.vllm",
    "VllmConfig": "slotune.tuner.engines.vllm",
    "Engine": "slotune.tuner.sim.config",
    "config_from_params": "slotune.tuner.sim.config",
    "resolve": "slotune.tuner.sim.config",
    "EngineCore": "slotune.tuner.sim.engine",
    "EngineStats": "slotune.tuner.sim.engine",
    "StepResult": "slotune.tuner.sim.engine",
    "extra_llm_api_options": "slotune.tuner.sim.flags",
    "launch_command": "slotune.tuner.sim.flags",
    "parse_engine_flags": "slotune.tuner.sim.flags",
    "to_argv": "slotune.tuner.sim.flags",
    "RequestRejected": "slotune.tuner.sim.request",
    "SimRequest": "slotune.tuner.sim.request",
    "EngineSeries": "slotune.tuner.sim.results",
    "RequestTiming": "slotune.tuner.sim.results",
    "SimResult": "slotune.tuner.sim.results",
    "simulate": "slotune.tuner.sim.simulator",
    "trace_requests": "slotune.tuner.sim.simulator",
}

__all__ = [
    "TRTLLM_FLAGS_HELP",
    "VLLM_FLAGS_HELP",
    "Engine",
    "EngineConfig",
    "EngineCore",
    "EngineSeries",
    "EngineStats",
    "RequestRejected",
    "RequestTiming",
    "ResolvedConfig",
    "ResolvedTrtllm",
    "ResolvedVllm",
    "SimRequest",
    "SimResult",
    "StepBreakdown",
    "StepResult",
    "TrtllmConfig",
    "VllmConfig",
    "config_from_params",
    "extra_llm_api_options",
    "launch_command",
    "parse_engine_flags",
    "resolve",
    "simulate",
    "to_argv",
    "trace_requests",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
