"""Engine configurations: the engines, and the entry points that work for every engine.

Each engine's configuration (its parameter names, defaults and validation) lives in its
adapter (:mod:`tuner.engines`); :func:`config_from_params` and :func:`resolve` dispatch to
it. The adapters' config classes and constants are importable from here too.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from slotune.collector.vocabulary import Engine as Engine
from slotune.tuner.engines.registry import adapter_for

if TYPE_CHECKING:
    # Re-exported (``X as X``) for the importers of the names that moved into the adapters.
    from slotune.tuner.engines.base import EngineConfig as EngineConfig
    from slotune.tuner.engines.base import ResolvedConfig as ResolvedConfig
    from slotune.tuner.engines.trtllm import TRTLLM_CAPACITY_POLICIES as TRTLLM_CAPACITY_POLICIES
    from slotune.tuner.engines.trtllm import TRTLLM_KV_CACHE_DTYPES as TRTLLM_KV_CACHE_DTYPES
    from slotune.tuner.engines.trtllm import TRTLLM_PARAM_NAMES as TRTLLM_PARAM_NAMES
    from slotune.tuner.engines.trtllm import ResolvedTrtllm as ResolvedTrtllm
    from slotune.tuner.engines.trtllm import TrtllmConfig as TrtllmConfig
    from slotune.tuner.engines.vllm import VLLM_BLOCK_SIZES as VLLM_BLOCK_SIZES
    from slotune.tuner.engines.vllm import VLLM_KV_CACHE_DTYPES as VLLM_KV_CACHE_DTYPES
    from slotune.tuner.engines.vllm import VLLM_SCHEDULING_POLICIES as VLLM_SCHEDULING_POLICIES
    from slotune.tuner.engines.vllm import ResolvedVllm as ResolvedVllm
    from slotune.tuner.engines.vllm import VllmConfig as VllmConfig


# Names that moved into the engine adapters -> their module. Loaded on first use, so that
# an adapter may import this module.
_MOVED = {
    "EngineConfig": "slotune.tuner.engines.base",
    "ResolvedConfig": "slotune.tuner.engines.base",
    "TRTLLM_CAPACITY_POLICIES": "slotune.tuner.engines.trtllm",
    "TRTLLM_KV_CACHE_DTYPES": "slotune.tuner.engines.trtllm",
    "TRTLLM_PARAM_NAMES": "slotune.tuner.engines.trtllm",
    "ResolvedTrtllm": "slotune.tuner.engines.trtllm",
    "TrtllmConfig": "slotune.tuner.engines.trtllm",
    "VLLM_BLOCK_SIZES": "slotune.tuner.engines.vllm",
    "VLLM_KV_CACHE_DTYPES": "slotune.tuner.engines.vllm",
    "VLLM_SCHEDULING_POLICIES": "slotune.tuner.engines.vllm",
    "ResolvedVllm": "slotune.tuner.engines.vllm",
    "VllmConfig": "slotune.tuner.engines.vllm",
}


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def config_from_params(
    engine: str, model: str, gpu: str, params: Mapping[str, Any]
) -> EngineConfig:
    """Build a config from parameters named as the engine names them.

    vLLM takes its argument names (``max_num_seqs``); TensorRT-LLM its LLM API names,
    dotted for nested options (``kv_cache_config.enable_block_reuse``); each adapter says.

    Raises:
        ConfigError: unknown engine or parameter name.
    """
    return adapter_for(engine).config_from_params(model, gpu, params)


def resolve(config: EngineConfig) -> ResolvedConfig:
    """Fill in the engine's defaults for this GPU and model and validate like the engine.

    Raises:
        ConfigError: unknown GPU or model id.
        EngineConfigError: a combination the engine refuses at start.
    """
    return adapter_for(config.engine).resolve(config)
