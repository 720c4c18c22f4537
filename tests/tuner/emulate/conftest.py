"""Fixtures: emulated engines (vLLM, TensorRT-LLM and SGLang faces) on free ports of 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from emulate_helpers import RunningEmulator, make_emulator, new_request

from slotune.tuner.sim.config import resolve
from slotune.tuner.sim.emulate.faces import sglang_served
from slotune.tuner.sim.emulate.served import ServedModel
from slotune.tuner.sim.emulate.server import Emulator
from slotune.tuner.sim.emulate.settings import ServerSettings
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.flags import parse_engine_flags


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
    """An emulated SGLang over the simulator's engine core (llama-3.1-8b on an H100, 50x)."""
    config = parse_engine_flags(["--max-model-len", "2048"], model="llama-3.1-8b", gpu="h100-sxm")
    core = EngineCore.create(resolve(config))
    model = ServedModel("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", 2048, "sglang", "0")
    served = sglang_served(model, core.capacity, {"model_path": model.root, "page_size": 1})
    settings = ServerSettings(host="127.0.0.1", port=0, engine="sglang", speedup=50)
    running = RunningEmulator(Emulator(core, new_request, served, settings)).start()
    yield running
    running.close()
