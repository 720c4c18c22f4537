"""Fixtures: emulated engines (vLLM and TensorRT-LLM mode) on free ports of 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from emulate_helpers import RunningEmulator, make_emulator


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
