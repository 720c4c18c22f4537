"""Where and how the emulated engine serves: its own flags' values (parsed by
:mod:`.server_args`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slotune.tuner.sim.flags import CURRENT_VLLM_VERSION


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Where and how the emulated engine serves."""

    host: str = "127.0.0.1"
    port: int = 8000
    engine: str = "vllm"
    speedup: float = 1.0
    timings_file: Path | None = None
    seed: int = 0
    vllm_version: str = CURRENT_VLLM_VERSION
