"""The emulated engine's own flags; every other flag is an engine flag for
:func:`tuner.sim.flags.parse_engine_flags`.

Server flags: ``--host`` (default 127.0.0.1), ``--port`` (default 8000), ``--engine`` (one
of the emulated engines, :data:`tuner.emulate.faces.FACES`), ``--speedup K`` (the emulated GPU runs K times faster than real time),
``--timings-file PATH``, ``--seed N`` and ``--vllm-version`` (the release whose flags and
metric families to follow). ``--model`` (or the model given positionally, as in ``vllm serve
MODEL``), ``--gpu`` and ``--served-model-name`` are read by the engine-flag parser; ``--gpu``
defaults to ``h100-sxm``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from slotune.collector.errors import ConfigError
from slotune.tuner.emulate.faces import FACES
from slotune.tuner.emulate.settings import ServerSettings
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.sim.flags import CURRENT_VLLM_VERSION, vllm_release

DEFAULT_GPU = "h100-sxm"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"slotune emulate: {message}")


def _parser() -> _Parser:
    p = _Parser(
        prog="slotune emulate",
        description="Serve the engine simulator in real time behind an OpenAI-compatible "
        "HTTP server with the emulated engine's own flags, routes and metrics.",
        epilog=" ".join(adapter_for(engine).flags_help for engine in FACES)
        + " The model: --model ID or "
        "positionally (catalog id or Hugging Face name); the GPU: --gpu ID "
        f"(default {DEFAULT_GPU}).",
        allow_abbrev=False,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    p.add_argument(
        "--engine",
        choices=tuple(FACES),
        default="vllm",
        help="whose flags, routes and metrics to emulate (default vllm)",
    )
    p.add_argument(
        "--speedup",
        type=float,
        default=1.0,
        help="run the emulated GPU K times faster than real time (default 1)",
    )
    p.add_argument(
        "--timings-file",
        type=Path,
        default=None,
        help="append one JSON line per finished request (engine-side timings)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the generated output words")
    p.add_argument(
        "--vllm-version",
        default=CURRENT_VLLM_VERSION,
        help="the vLLM release whose /metrics families to serve (default "
        f"{CURRENT_VLLM_VERSION}; before 0.32 with the deprecated gpu_* twins)",
    )
    return p


def parse_server_args(argv: Sequence[str]) -> tuple[ServerSettings, list[str]]:
    """Split ``argv`` into the server's settings and the engine flags.

    ``-h`` / ``--help`` prints the usage (server and engine flags) and exits.

    Raises:
        ConfigError: a bad server flag value (e.g. ``--speedup 0``).
    """
    ns, engine_argv = _parser().parse_known_args(list(argv))
    if not (math.isfinite(ns.speedup) and ns.speedup > 0):
        raise ConfigError(f"--speedup must be a finite number > 0, got {ns.speedup}")
    vllm_release(ns.vllm_version)  # refuses what is not a version number, in one line
    if not 0 <= ns.port <= 65535:
        raise ConfigError(f"--port must be in 0..65535, got {ns.port}")
    settings = ServerSettings(
        host=ns.host,
        port=ns.port,
        engine=ns.engine,
        speedup=ns.speedup,
        timings_file=ns.timings_file,
        seed=ns.seed,
        vllm_version=ns.vllm_version,
    )
    return settings, engine_argv
