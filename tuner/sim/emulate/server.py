"""Start, run and stop the emulated engine.

Startup mirrors ``vllm serve``: the engine configuration is built and validated first (an
invalid one fails before the port is bound, worded like the engine), the KV cache lines are
logged, then the API server binds and logs where it listens. SIGINT and SIGTERM stop it
cleanly: in-flight streams are cut, the port is released and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from aiohttp import web

from slotune.collector.errors import ConfigError
from slotune.tuner.sim.config import ResolvedTrtllm, ResolvedVllm, VllmConfig, resolve
from slotune.tuner.sim.emulate.app import ServedModel, create_app
from slotune.tuner.sim.emulate.core_view import EngineCoreLike
from slotune.tuner.sim.emulate.lag import LagMetrics
from slotune.tuner.sim.emulate.read_site import ReadStampingSite, ReadTimes
from slotune.tuner.sim.emulate.realtime import EngineObserver, RealtimeEngine, RequestFactory
from slotune.tuner.sim.emulate.settings import DEFAULT_GPU, ServerSettings, parse_server_args
from slotune.tuner.sim.emulate.stats_log import StatsLog
from slotune.tuner.sim.emulate.timings import TimingsFile
from slotune.tuner.sim.emulate.trtllm_metrics import TrtllmMetrics, TrtllmStatic
from slotune.tuner.sim.emulate.vllm_metrics import (
    CacheConfigInfo,
    VllmMetrics,
    cache_config_labels,
)
from slotune.tuner.sim.flags import check_vllm_flags, parse_engine_flags
from slotune.tuner.sim.memory import KvCapacity
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
        model: ServedModel,
        metrics: VllmMetrics | TrtllmMetrics,
        settings: ServerSettings,
    ) -> None:
        self.settings = settings
        self.model = model
        self.metrics = metrics
        self._timings = TimingsFile(settings.timings_file) if settings.timings_file else None
        self.stats_log = StatsLog(log)
        observers: list[EngineObserver] = [metrics, LagMetrics(metrics.registry), self.stats_log]
        if self._timings is not None:
            observers.append(self._timings)
        self.engine = RealtimeEngine(core, new_request, settings.speedup, observers)
        self._reads = ReadTimes()
        self.app = create_app(self.engine, model, metrics, settings.seed, self._reads)

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
                "vLLM" if isinstance(self.metrics, VllmMetrics) else "TensorRT-LLM",
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
    if settings.engine == "vllm":
        check_vllm_flags(engine_argv, settings.vllm_version)
    config = parse_engine_flags(engine_argv, engine=settings.engine, gpu=DEFAULT_GPU)
    if isinstance(config, VllmConfig) and config.served_model_name is None:
        # vLLM serves under the --model value as given unless --served-model-name says else.
        config = dataclasses.replace(config, served_model_name=config.model)
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

    counters = core.stats
    if isinstance(resolved, ResolvedVllm):
        model = ServedModel(
            resolved.served_model_name,
            resolved.model.hf_name,
            resolved.max_model_len,
            "vllm",
            _version(),
        )
        metrics: VllmMetrics | TrtllmMetrics = VllmMetrics(
            model.served_name,
            resolved.max_model_len,
            cache_config_labels(
                CacheConfigInfo(
                    block_size=resolved.block_size,
                    cache_dtype=resolved.kv_cache_dtype,
                    enable_prefix_caching=resolved.enable_prefix_caching,
                    gpu_memory_utilization=resolved.gpu_memory_utilization,
                    num_gpu_blocks=counters.kv_blocks,
                    max_model_len=resolved.max_model_len,
                ),
                settings.vllm_version,
            ),
            vllm_version=settings.vllm_version,
        )
    else:
        assert isinstance(resolved, ResolvedTrtllm)
        model = ServedModel(
            config.model, resolved.model.hf_name, resolved.max_seq_len, "tensorrt_llm", _version()
        )
        metrics = TrtllmMetrics(
            model.served_name,
            TrtllmStatic(
                max_batch_size=resolved.max_batch_size,
                max_num_tokens=resolved.max_num_tokens,
                tokens_per_block=resolved.tokens_per_block,
                gpu_mem_usage_bytes=_gpu_memory_used_bytes(core.capacity),
            ),
        )
    return Emulator(core, new_request, model, metrics, settings)


def _gpu_memory_used_bytes(cap: KvCapacity) -> int:
    return (
        cap.weights_bytes
        + cap.activation_bytes
        + cap.cuda_graph_bytes
        + cap.available_kv_bytes
        + cap.non_torch_bytes
    )


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
