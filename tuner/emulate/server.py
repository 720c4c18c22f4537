"""Start, run and stop the emulated engine.

Startup mirrors ``vllm serve``: the engine configuration is built and validated first (an
invalid one fails before the port is bound, worded like the engine), the KV cache lines are
logged, then the API server binds and logs where it listens. SIGINT and SIGTERM stop it
cleanly: in-flight streams are cut, the port is released and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from aiohttp import web

from slotune.collector.errors import ConfigError
from slotune.tuner.emulate.app import Served, create_app
from slotune.tuner.emulate.core_view import EngineCoreLike
from slotune.tuner.emulate.faces import FaceInputs, face_of
from slotune.tuner.emulate.lag import LagMetrics
from slotune.tuner.emulate.read_site import ReadStampingSite, ReadTimes
from slotune.tuner.emulate.realtime import EngineObserver, RealtimeEngine, RequestFactory
from slotune.tuner.emulate.server_args import DEFAULT_GPU, parse_server_args
from slotune.tuner.emulate.settings import ServerSettings
from slotune.tuner.emulate.stats_log import StatsLog
from slotune.tuner.emulate.timings import TimingsFile
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.sim.config import resolve
from slotune.tuner.sim.flags import parse_engine_flags
from slotune.tuner.sim.request import SimRequest

log = logging.getLogger("slotune.emulate")
_SHUTDOWN_GRACE_S = 1.0
_TYPICAL_REQUEST_TOKENS = 2048


def _version() -> str:
    try:
        return version("slotune")
    except PackageNotFoundError:
        return "0+unknown"


class Emulator:
    """An engine core wired to the real-time loop, its observers and the HTTP app."""

    def __init__(
        self,
        core: EngineCoreLike,
        new_request: RequestFactory,
        served: Served,
        settings: ServerSettings,
    ) -> None:
        self.settings = settings
        self.served = served
        self.model = served.model
        self.metrics = served.exporter
        self._timings = TimingsFile(settings.timings_file) if settings.timings_file else None
        self.stats_log = StatsLog(log)
        observers: list[EngineObserver] = [
            self.metrics,
            LagMetrics(self.metrics.registry),
            self.stats_log,
        ]
        if self._timings is not None:
            observers.append(self._timings)
        self.engine = RealtimeEngine(core, new_request, settings.speedup, observers)
        self._reads = ReadTimes()
        self.app = create_app(self.engine, served, settings.seed, self._reads)

    async def serve(
        self, stop: asyncio.Event, on_ready: Callable[[int], None] | None = None
    ) -> None:
        """Serve until ``stop`` is set; ``on_ready`` gets the bound port.

        If the engine loop dies, the server stops too (as vLLM's API server does when its
        engine core dies) and the loop's exception propagates.
        """
        loop_task = asyncio.create_task(self.engine.run())
        loop_task.add_done_callback(lambda _: stop.set())
        log_task = asyncio.create_task(self.stats_log.run())
        runner = web.AppRunner(
            self.app, handler_cancellation=True, access_log=None, shutdown_timeout=_SHUTDOWN_GRACE_S
        )
        await runner.setup()
        try:
            site = ReadStampingSite(runner, self.settings.host, self.settings.port, self._reads)
            try:
                await site.start()
            except OSError as e:
                raise ConfigError(
                    f"cannot bind {self.settings.host}:{self.settings.port} "
                    f"({e.strerror}); pass a free --port"
                ) from e
            port = site.port
            log.info(
                "Starting slotune emulated %s API server on http://%s:%d",
                self.served.display_name,
                self.settings.host,
                port,
            )
            if on_ready is not None:
                on_ready(port)
            await stop.wait()
            log.info("Shutting down the API server")
        finally:
            self.engine.stop()
            log_task.cancel()
            await runner.cleanup()
            await loop_task
            with contextlib.suppress(asyncio.CancelledError):
                await log_task
            if self._timings is not None:
                self._timings.close()


def build_emulator(argv: Sequence[str]) -> Emulator:
    """Parse the command line and build the engine exactly as ``slotune emulate`` does.

    Raises:
        ConfigError: bad flags, unknown model or GPU.
        EngineConfigError: a configuration the engine itself refuses, worded like it.
    """
    from slotune.tuner.sim.engine import EngineCore

    settings, engine_argv = parse_server_args(argv)
    face = face_of(settings.engine)
    face.check_flags(engine_argv, settings)
    config = parse_engine_flags(engine_argv, engine=settings.engine, gpu=DEFAULT_GPU)
    resolved = resolve(config)
    core = EngineCore.create(resolved)
    for line in core.kv_log_lines():
        log.info("%s", line)
    # the emulator does not know its workload: a typical chat request stands in for it
    kv_warning = core.kv_room_warning(_TYPICAL_REQUEST_TOKENS, "a typical chat request")
    if kv_warning:
        log.warning("%s", kv_warning)

    def new_request(
        request_id: str,
        arrival_s: float,
        prompt_token_ids: Sequence[int],
        max_tokens: int,
        min_tokens: int,
    ) -> Any:
        return SimRequest(
            request_id=request_id,
            arrival_s=arrival_s,
            prompt_tokens=len(prompt_token_ids),
            max_tokens=max_tokens,
            prompt_token_ids=tuple(prompt_token_ids),
        )

    view = adapter_for(settings.engine).sim_view(resolved, core.capacity)
    inputs = FaceInputs(
        config,
        resolved,
        core.capacity,
        core.stats.kv_blocks,
        not view.enforce_eager,
        settings,
        _version(),
    )
    return Emulator(core, new_request, face.build(inputs), settings)


def configure_logging() -> None:
    """vLLM-style log lines on stdout: ``INFO 11-29 16:00:00 [slotune.emulate] ...``."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        logging.Formatter(
            "%(levelname)s %(asctime)s [%(name)s] %(message)s", datefmt="%m-%d %H:%M:%S"
        )
    )
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def serve(argv: Sequence[str]) -> None:
    """Run ``slotune emulate`` with this command line until SIGINT or SIGTERM.

    Raises:
        ConfigError: bad flags, unknown model or GPU, port in use.
        EngineConfigError: a configuration the engine refuses (before the port is bound).
    """
    configure_logging()
    emulator = build_emulator(argv)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await emulator.serve(stop)

    asyncio.run(main())
