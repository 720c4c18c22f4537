"""Flags a vLLM release no longer has are refused before a trial starts, in vLLM's words."""

from __future__ import annotations

import pytest

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.tuner.sim.flags import CURRENT_VLLM_VERSION, check_vllm_flags, vllm_flags_missing


def test_current_release_refuses_dropped_partial_prefill_flags() -> None:
    argv = [
        "--max-num-seqs",
        "64",
        "--max_num_partial_prefills",
        "2",
        "--max-long-partial-prefills=1",
    ]
    assert vllm_flags_missing(argv) == [
        "--max_num_partial_prefills",
        "2",
        "--max-long-partial-prefills=1",
    ]
    with pytest.raises(EngineConfigError, match=r"^vllm serve: error: unrecognized arguments: "):
        check_vllm_flags(argv, CURRENT_VLLM_VERSION)


def test_older_release_and_known_flags_pass() -> None:
    check_vllm_flags(["--max-num-partial-prefills", "2"], "0.15.1")
    check_vllm_flags(["--max-num-seqs", "64", "--enable-prefix-caching"])


def test_bad_version_is_one_clear_line() -> None:
    with pytest.raises(ConfigError, match="not a version number"):
        check_vllm_flags([], "latest")
