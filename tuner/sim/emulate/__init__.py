"""The emulated engine: the simulator in real time behind an OpenAI-compatible HTTP server.

``slotune emulate`` (or ``python -m tuner.sim.emulate``) takes vLLM's flags (or
``trtllm-serve``'s with ``--engine trtllm``), serves ``/v1/completions``,
``/v1/chat/completions``, ``/v1/models``, ``/health``, ``/version`` and the engine's metrics.
"""

from slotune.tuner.sim.emulate.app import ServedModel, create_app
from slotune.tuner.sim.emulate.realtime import RealtimeEngine
from slotune.tuner.sim.emulate.server import Emulator, build_emulator, serve
from slotune.tuner.sim.emulate.settings import ServerSettings, parse_server_args

__all__ = [
    "Emulator",
    "RealtimeEngine",
    "ServedModel",
    "ServerSettings",
    "build_emulator",
    "create_app",
    "parse_server_args",
    "serve",
]
