"""Argument parsing shared by the adapters: a parser that raises, and the value types.

The types refuse what would silently mean something else: 0 for a count (the engine's
default), ``nan`` for a fraction.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any, NoReturn

from slotune.collector.errors import ConfigError


class RaisingParser(argparse.ArgumentParser):
    """An argparse parser whose errors are :class:`ConfigError` instead of an exit."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog=prog, add_help=False, allow_abbrev=False, exit_on_error=False)

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def human_int(text: str) -> int:
    """A length with vLLM's suffixes: k = 1000, K = 1024, m = 10**6, M = 2**20."""
    scale = {"k": 1000, "K": 1024, "m": 10**6, "M": 1 << 20}
    try:
        n = int(float(text[:-1]) * scale[text[-1]]) if text and text[-1] in scale else int(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"invalid length: {text!r}") from None
    return _at_least(n, 1, text)


def count(text: str) -> int:
    """A whole number of at least 1 (0 would silently mean the default)."""
    try:
        return _at_least(int(text), 1, text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None


def non_negative(text: str) -> int:
    """A whole number of at least 0 (where 0 is the engine's "off")."""
    try:
        return _at_least(int(text), 0, text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None


def _at_least(n: int, low: int, text: str) -> int:
    if n < low:
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number of at least {low}")
    return n


def finite(text: str) -> float:
    """A finite float."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return x


def arg_type(typ: Any, *, zero_means_off: bool = False) -> Any:
    """The argparse type of a flag declared ``int``, ``float``, ``"len"`` or ``str``."""
    if typ == "len":
        return human_int
    if typ is int:
        return non_negative if zero_means_off else count
    if typ is float:
        return finite
    return typ


def split_model(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """The model given first and positionally (``vllm serve MODEL …``), and the rest."""
    if argv and not argv[0].startswith("-"):
        return argv[0], list(argv[1:])
    return None, list(argv)


def require_model_and_gpu(
    values: dict[str, Any], model: str | None, gpu: str | None, *, model_flag: str = "--model"
) -> tuple[str, str]:
    """Pop ``model`` and ``gpu`` from parsed ``values``, falling back to the given ones.

    Raises:
        ConfigError: either is missing.
    """
    model = values.pop("model", None) or model
    gpu = values.pop("gpu", None) or gpu
    if not model:
        raise ConfigError(
            f"the model is missing; pass {model_flag} ID (see slotune sim --list-models)"
        )
    if not gpu:
        raise ConfigError("the GPU is missing; pass --gpu ID (see slotune sim --list-gpus)")
    return model, gpu
