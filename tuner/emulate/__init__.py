"""The emulated engine: the simulator in real time behind an OpenAI-compatible HTTP server.

``slotune emulate`` (or ``python -m tuner.emulate``) takes the emulated engine's own
flags (vLLM's by default, ``--engine`` picks another), serves ``/v1/completions``,
``/v1/chat/completions``, ``/v1/models``, ``/health``, the engine's own routes and its
metrics (:mod:`.faces`).
"""

from slotune.tuner.emulate.app import Served, create_app
from slotune.tuner.emulate.realtime import RealtimeEngine
from slotune.tuner.emulate.served import ServedModel
from slotune.tuner.emulate.server import Emulator, build_emulator, serve
from slotune.tuner.emulate.server_args import parse_server_args
from slotune.tuner.emulate.settings import ServerSettings

__all__ = [
    "Emulator",
    "RealtimeEngine",
    "Served",
    "ServedModel",
    "ServerSettings",
    "build_emulator",
    "create_app",
    "parse_server_args",
    "serve",
]
