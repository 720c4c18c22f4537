"""The engine simulator: a vLLM / TensorRT-LLM scheduler mirror priced by a cost model.

Public surface: engine configs by the engines' own parameter names, the flag parser and
launch-command export, the engine core the emulated HTTP engine drives, and
:func:`simulate` for offline trace replay.
"""

from slotune.collector.run_figures import StepBreakdown
from slotune.tuner.sim.config import (
    Engine,
    EngineConfig,
    ResolvedConfig,
    ResolvedTrtllm,
    ResolvedVllm,
    TrtllmConfig,
    VllmConfig,
    config_from_params,
    resolve,
)
from slotune.tuner.sim.engine import EngineCore, EngineStats, StepResult
from slotune.tuner.sim.flags import (
    TRTLLM_FLAGS_HELP,
    VLLM_FLAGS_HELP,
    extra_llm_api_options,
    launch_command,
    parse_engine_flags,
    to_argv,
)
from slotune.tuner.sim.request import RequestRejected, SimRequest
from slotune.tuner.sim.results import EngineSeries, RequestTiming, SimResult
from slotune.tuner.sim.simulator import simulate, trace_requests

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
