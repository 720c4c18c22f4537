"""The product's vocabulary: the kinds every layer names, free of dependencies.

The CLI imports these enums at start-up (Typer takes an Enum as a choice), so this module
imports nothing but the standard library. Each enum has one home here; the modules that
act on a kind import it from here instead of spelling the values again.
"""

from __future__ import annotations

from enum import StrEnum


class Engine(StrEnum):
    """The serving engines slotune models and tunes (one enum for the whole product)."""

    VLLM = "vllm"
    TRTLLM = "trtllm"
    SGLANG = "sglang"
