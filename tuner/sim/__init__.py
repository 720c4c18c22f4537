"""The engine simulator: each engine's scheduler mirror priced by a cost model.

Public surface: engine configs by the engines' own parameter names, the flag parser and
launch-command export, the engine core the emulated HTTP engine drives, and
:func:`simulate` for offline trace replay. Names are imported on first use (PEP 562): the
engine adapters (``tuner.engines``) build on this package's modules, so importing one of
those must not import every adapter through here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slotune.tuner._lazy import lazy_names as _lazy_names

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
    from slotune.tuner.sim.replay import WorkloadChoice, simulate_flags
    from slotune.tuner.sim.request import RequestRejected, SimRequest
    from slotune.tuner.sim.results import EngineSeries, RequestTiming, SimResult
    from slotune.tuner.sim.simulator import (
        ProgressCallback,
        load_workload,
        simulate,
        trace_requests,
    )

# module -> the names it gives this package on first use
_LAZY: dict[str, tuple[str, ...]] = {
    "slotune.collector.run_figures": ("StepBreakdown",),
    "slotune.tuner.engines.base": ("EngineConfig", "ResolvedConfig"),
    "slotune.tuner.engines.trtllm": ("TRTLLM_FLAGS_HELP", "ResolvedTrtllm", "TrtllmConfig"),
    "slotune.tuner.engines.vllm": ("VLLM_FLAGS_HELP", "ResolvedVllm", "VllmConfig"),
    "slotune.tuner.sim.config": ("Engine", "config_from_params", "resolve"),
    "slotune.tuner.sim.engine": ("EngineCore", "EngineStats", "StepResult"),
    "slotune.tuner.sim.flags": (
        "extra_llm_api_options",
        "launch_command",
        "parse_engine_flags",
        "to_argv",
    ),
    "slotune.tuner.sim.replay": ("WorkloadChoice", "simulate_flags"),
    "slotune.tuner.sim.request": ("RequestRejected", "SimRequest"),
    "slotune.tuner.sim.results": ("EngineSeries", "RequestTiming", "SimResult"),
    "slotune.tuner.sim.simulator": (
        "ProgressCallback",
        "load_workload",
        "simulate",
        "trace_requests",
    ),
}

__all__ = [
    "TRTLLM_FLAGS_HELP",
    "VLLM_FLAGS_HELP",
    "Engine",
    "EngineConfig",
    "EngineCore",
    "EngineSeries",
    "EngineStats",
    "ProgressCallback",
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
    "WorkloadChoice",
    "config_from_params",
    "extra_llm_api_options",
    "launch_command",
    "load_workload",
    "parse_engine_flags",
    "resolve",
    "simulate",
    "simulate_flags",
    "to_argv",
    "trace_requests",
]

# type checkers see only the names imported above, so a misspelt one is an error
if not TYPE_CHECKING:
    __getattr__ = _lazy_names(__name__, _LAZY)
