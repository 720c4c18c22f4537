"""A best configuration as the exact launch command (vLLM) or YAML + command (TensorRT-LLM)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from enum import StrEnum

import yaml

from slotune.collector.errors import ConfigError
from slotune.tuner.sim.config import TrtllmConfig, config_from_params
from slotune.tuner.sim.flags import extra_llm_api_options, launch_command
from slotune.tuner.space import Value

TRTLLM_OPTIONS_FILE = "extra_llm_api_options.yaml"


class ExportFormat(StrEnum):
    VLLM = "vllm"
    TRTLLM = "trtllm"


def export_config(
    config: Mapping[str, Value], *, engine: str, model: str, gpu: str, fmt: ExportFormat | str
) -> str:
    """Render a configuration for the engine it was tuned for.

    Args:
        config: engine parameters by the engine's names (a trial's ``config``).
        engine: the engine the study tuned (``vllm`` / ``trtllm``).
        model, gpu: catalog ids.
        fmt: ``vllm`` (a ``vllm serve`` command line) or ``trtllm`` (a ``trtllm-serve``
            command line followed by the YAML of its ``--extra_llm_api_options`` file).

    Raises:
        ConfigError: the format does not match the engine the study tuned.
    """
    try:
        f = ExportFormat(fmt)
    except ValueError as e:
        raise ConfigError(f"--format {fmt!r}: use vllm or trtllm") from e
    if f.value != engine:
        raise ConfigError(f"this study tuned {engine} parameters; export it with --format {engine}")
    engine_config = config_from_params(engine, model, gpu, config)
    argv = launch_command(engine_config, extra_options_path=TRTLLM_OPTIONS_FILE)
    command = shlex.join(argv)
    if not isinstance(engine_config, TrtllmConfig):
        return command + "\n"
    options = yaml.safe_dump(extra_llm_api_options(engine_config), sort_keys=False)
    return (
        f"# {TRTLLM_OPTIONS_FILE}\n{options}---\n"
        f"# launch (with {TRTLLM_OPTIONS_FILE} in the working directory):\n# {command}\n"
    )
