"""Fixtures: emulated engines (vLLM, TensorRT-LLM and SGLang faces) on free ports of 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from emulate_helpers import RunningEmulator, make_emulator

from slotune.tuner.emulate.server import build_emulator


@pytest.fixture
def vllm_emulator() -> Iterator[RunningEmulator]:
    running = make_emulator("vllm").start()
    yield running
    running.close()


@pytest.fixture
def trtllm_emulator() -> Iterator[RunningEmulator]:
    running = make_emulator("trtllm").start()
    yield running
    running.close()


@pytest.fixture
def sglang_emulator() -> Iterator[RunningEmulator]:
    """``slotune emulate --engine sglang`` (llama-3.1-8b on an H100, 50x), in this process."""
    argv = ["--engine", "sglang", "--model-path", "llama-3.1-8b", "--gpu", "h100-sxm"]
    argv += ["--context-length", "2048", "--port", "0", "--speedup", "50"]
    running = RunningEmulator(build_emulator(argv)).start()
    yield running
    running.close()
