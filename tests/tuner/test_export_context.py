"""An exported launch command never accepts less than the workload's longest request
without saying so."""

from __future__ import annotations

import shlex

from slotune.tuner.sim.flags import parse_engine_flags
from slotune.tuner.tune.export import export_config


def _exported(longest: int | None, max_model_len: int = 8192) -> tuple[list[str], int | None]:
    text = export_config(
        {"max_model_len": max_model_len, "max_num_seqs": 256},
        engine="vllm",
        model="llama-3.1-8b",
        gpu="h100-sxm",
        fmt="vllm",
        longest_tokens=longest,
    )
    notes = [ln for ln in text.splitlines() if ln.startswith("# note:")]
    (command,) = [ln for ln in text.splitlines() if ln.startswith("vllm serve")]
    config = parse_engine_flags(shlex.split(command)[3:], model="llama-3.1-8b", gpu="h100-sxm")
    return notes, config.max_model_len


def test_a_context_length_below_the_longest_request_is_raised_and_said() -> None:
    notes, max_model_len = _exported(14_089)
    assert max_model_len == 16384
    (note,) = notes
    assert "max_model_len raised from 8192" in note and "14089 tokens" in note


def test_a_context_length_that_fits_is_kept_silently() -> None:
    assert _exported(8000) == ([], 8192)
    assert _exported(None) == ([], 8192)


def test_a_request_longer_than_the_model_is_named() -> None:
    notes, max_model_len = _exported(200_000)
    assert max_model_len == 131072  # the model's own context
    assert len(notes) == 2 and "rejects such requests whatever its configuration" in notes[1]
