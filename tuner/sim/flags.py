"""Engine flags by the engines' own spellings, and configs back into launch commands.

Each engine's flags live in its adapter (:mod:`tuner.engines`); the functions here dispatch
to the adapter of the config's (or the named) engine. ``--gpu`` (a catalog id) is slotune's
own: the GPU the simulated engine runs on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slotune.tuner.engines.base import EngineConfig
from slotune.tuner.engines.registry import DEFAULT_ENGINE, adapter_for
from slotune.tuner.engines.trtllm import (
    TRTLLM_FLAGS_HELP,
    TRTLLM_OPTIONS_FILE,
    extra_llm_api_options,
    load_extra_llm_api_options,
)
from slotune.tuner.engines.vllm import (
    CURRENT_VLLM_VERSION,
    VLLM_FLAGS_HELP,
    check_vllm_flags,
    vllm_flags_missing,
    vllm_release,
)

__all__ = [
    "CURRENT_VLLM_VERSION",
    "TRTLLM_FLAGS_HELP",
    "VLLM_FLAGS_HELP",
    "check_vllm_flags",
    "extra_llm_api_options",
    "launch_command",
    "launch_files",
    "load_extra_llm_api_options",
    "parse_engine_flags",
    "to_argv",
    "vllm_flags_missing",
    "vllm_release",
]


def parse_engine_flags(
    argv: Sequence[str],
    *,
    engine: str = DEFAULT_ENGINE,
    model: str | None = None,
    gpu: str | None = None,
) -> EngineConfig:
    """Parse engine flags into a config (defaults stay unset until :func:`resolve`).

    Args:
        argv: the flags, e.g. ``["--max-num-seqs", "64", "--no-enable-prefix-caching"]``.
        engine: whose flags (an engine with an adapter).
        model: catalog model id, unless ``argv`` names it (``--model`` or positionally).
        gpu: catalog GPU id, unless ``argv`` has ``--gpu``.

    Raises:
        ConfigError: unknown engine or flag, bad value, or missing model/GPU, worded like
            the engine.
    """
    return adapter_for(engine).parse_flags(argv, model=model, gpu=gpu)


def to_argv(config: EngineConfig, *, extra_options_path: str | None = None) -> list[str]:
    """The engine flags that reproduce ``config`` (model and GPU not included).

    Only parameters the config sets are written, so engine defaults stay the engine's.
    Settings the engine reads from a file (:func:`launch_files`) are referred to by
    ``extra_options_path``.

    Raises:
        ConfigError: the config needs an options file but no path was given.
    """
    return adapter_for(config.engine).to_argv(config, options_path=extra_options_path)


def launch_files(config: EngineConfig) -> dict[str, Any]:
    """The options file the launch command reads (TensorRT-LLM's LLM API YAML); {} if none."""
    return adapter_for(config.engine).launch_files(config)


def launch_command(
    config: EngineConfig, *, extra_options_path: str = TRTLLM_OPTIONS_FILE
) -> list[str]:
    """The real engine's launch command for ``config`` (``vllm serve …`` / ``trtllm-serve …``).

    The model is the catalog entry's Hugging Face name. Write :func:`launch_files` as YAML to
    ``extra_options_path`` next to it when it is not empty.
    """
    return adapter_for(config.engine).launch_command(config, options_path=extra_options_path)
