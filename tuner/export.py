"""A best configuration as the exact launch command (vLLM) or YAML + command (TensorRT-LLM)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from enum import StrEnum

import yaml

from slotune.collector.errors import ConfigError
from slotune.tuner.sim.catalog import get_model
from slotune.tuner.sim.config import TrtllmConfig, config_from_params
from slotune.tuner.sim.flags import extra_llm_api_options, launch_command
from slotune.tuner.space import Value

TRTLLM_OPTIONS_FILE = "extra_llm_api_options.yaml"
# The engine's context-length parameter, by engine.
_LENGTH_KEYS = {"vllm": "max_model_len", "trtllm": "max_seq_len"}


class ExportFormat(StrEnum):
    VLLM = "vllm"
    TRTLLM = "trtllm"


def context_length_for(longest_tokens: int, model: str) -> int:
    """The context length an operator would set for requests of up to ``longest_tokens``
    (prompt + output): the next power of two, at least 2048, at most the model's own."""
    wanted = max(2048, 1 << (max(1, longest_tokens) - 1).bit_length())
    return min(wanted, get_model(model).max_position_embeddings)


def export_config(
    config: Mapping[str, Value],
    *,
    engine: str,
    model: str,
    gpu: str,
    fmt: ExportFormat | str,
    longest_tokens: int | None = None,
) -> str:
    """Render a configuration for the engine it was tuned for.

    A configuration whose context length is below the workload's longest request would make
    the deployed engine reject requests of that workload: the export raises it to
    :func:`context_length_for` the longest, and says so in a ``# note:`` line.

    Args:
        config: engine parameters by the engine's names (a trial's ``config``).
        engine: the engine the study tuned (``vllm`` / ``trtllm``).
        model, gpu: catalog ids.
        fmt: ``vllm`` (a ``vllm serve`` command line) or ``trtllm`` (a ``trtllm-serve``
            command line followed by the YAML of its ``--extra_llm_api_options`` file).
        longest_tokens: prompt + output tokens of the workload's longest request, over the
            whole workload (not the tuning sample); None: not checked.

    Raises:
        ConfigError: the format does not match the engine the study tuned.
    """
    try:
        f = ExportFormat(fmt)
    except ValueError as e:
        raise ConfigError(f"--format {fmt!r}: use vllm or trtllm") from e
    if f.value != engine:
        raise ConfigError(f"this study tuned {engine} parameters; export it with --format {engine}")
    config, note = _covering(config, engine, model, longest_tokens)
    engine_config = config_from_params(engine, model, gpu, config)
    argv = launch_command(engine_config, extra_options_path=TRTLLM_OPTIONS_FILE)
    command = shlex.join(argv)
    if not isinstance(engine_config, TrtllmConfig):
        return note + command + "\n"
    options = yaml.safe_dump(extra_llm_api_options(engine_config), sort_keys=False)
    return (
        f"{note}# {TRTLLM_OPTIONS_FILE}\n{options}---\n"
        f"# launch (with {TRTLLM_OPTIONS_FILE} in the working directory):\n# {command}\n"
    )


def _covering(
    config: Mapping[str, Value], engine: str, model: str, longest_tokens: int | None
) -> tuple[dict[str, Value], str]:
    """The configuration with a context length that fits the longest request, and the
    ``# note:`` lines that say what was raised or cannot fit (empty when neither)."""
    out = dict(config)
    key = _LENGTH_KEYS.get(engine)
    tuned = out.get(key) if key else None
    if (
        key is None
        or longest_tokens is None
        or not isinstance(tuned, int)
        or tuned >= longest_tokens
    ):
        return out, ""
    raised = max(tuned, context_length_for(longest_tokens, model))
    out[key] = raised
    notes = []
    if raised > tuned:
        notes.append(
            f"# note: {key} raised from {tuned}, the value tuned with, to {raised}: the "
            f"workload's longest request has {longest_tokens} tokens (prompt + output), which "
            f"{tuned} would reject\n"
        )
    if raised < longest_tokens:
        notes.append(
            f"# note: the workload's longest request has {longest_tokens} tokens, more than "
            f"{model}'s context of {raised}: the engine rejects such requests whatever "
            "its configuration\n"
        )
    return out, "".join(notes)
