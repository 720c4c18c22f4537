"""A best configuration as the exact launch command the engine accepts (and any file it reads).

Each engine's format is its adapter's (:meth:`EngineAdapter.export`): a ``vllm serve``
command line, or TensorRT-LLM's ``--extra_llm_api_options`` YAML followed by the
``trtllm-serve`` command that reads it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from slotune.collector.errors import ConfigError
from slotune.collector.vocabulary import Engine
from slotune.tuner.engines.param import Value
from slotune.tuner.engines.registry import adapter_for, engine_names, engines
from slotune.tuner.sim.catalog import get_model


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
    fmt: Engine | str,
    longest_tokens: int | None = None,
    served_model: str | None = None,
) -> str:
    """Render a configuration for the engine it was tuned for.

    A configuration whose context length is below the workload's longest request would make
    the deployed engine reject requests of that workload: the export raises it to
    :func:`context_length_for` the longest, and says so in a ``# note:`` line.

    Args:
        config: engine parameters by the engine's names (a trial's ``config``).
        engine: the engine the study tuned.
        model, gpu: catalog ids.
        fmt: the engine's name: its adapter's export (a ``vllm serve`` command line; a
            ``trtllm-serve`` command line after the YAML of its options file; …).
        longest_tokens: prompt + output tokens of the workload's longest request, over the
            whole workload (not the tuning sample); None: not checked.
        served_model: the model the measured engines served, named in place of the catalog
            model's Hugging Face name (None: the catalog's).

    Raises:
        ConfigError: the format does not match the engine the study tuned.
    """
    if str(fmt) not in {e.value for e in engines()}:
        raise ConfigError(f"--format {fmt!r}: use one of {engine_names()}")
    if str(fmt) != engine:
        raise ConfigError(f"this study tuned {engine} parameters; export it with --format {engine}")
    adapter = adapter_for(engine)
    config, note = _covering(config, adapter.length_param, model, longest_tokens)
    text = adapter.export(adapter.config_from_params(model, gpu, config))
    if served_model is not None:
        text = text.replace(get_model(model).hf_name, shlex.quote(served_model))
    return note + text


# Where an engine's command line names its model: an option's value, or the word after these.
_MODEL_OPTIONS = ("--model", "--model-path", "--model_path")
_MODEL_AFTER = ("serve", "trtllm-serve")


def model_in_argv(argv: Sequence[str]) -> str | None:
    """The model an engine command line serves (``vllm serve M``, ``--model M``,
    ``--model-path=M``, ``trtllm-serve M``), None when it names none."""
    for i, word in enumerate(argv):
        key, eq, value = word.partition("=")
        if key in _MODEL_OPTIONS and eq:
            return value
        nxt = argv[i + 1] if i + 1 < len(argv) else "-"
        names_next = word in _MODEL_OPTIONS or Path(word).name in _MODEL_AFTER
        if names_next and not nxt.startswith("-"):
            return nxt
    return None


def _covering(
    config: Mapping[str, Value], key: str, model: str, longest_tokens: int | None
) -> tuple[dict[str, Value], str]:
    """The configuration with a context length (``key``) that fits the longest request, and
    the ``# note:`` lines that say what was raised or cannot fit (empty when neither)."""
    out = dict(config)
    tuned = out.get(key)
    if longest_tokens is None or not isinstance(tuned, int) or tuned >= longest_tokens:
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
