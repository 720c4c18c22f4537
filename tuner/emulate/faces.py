"""What the emulated engine shows of each engine: one row per engine in :data:`FACES`.

A face takes the engine's flags, checks them as that engine would, and builds the parts of
the server a client can tell apart: the model card, the metrics exporter, the route table
and the HTTP middlewares (:class:`~.served.Served`), and where the Prometheus text is
served. The server, the HTTP app and the lag reader look the engine up here and nowhere
else. Adding an engine to the emulator is a builder and a row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from slotune.collector.errors import ConfigError
from slotune.tuner.emulate.app import EngineRoutes, Served
from slotune.tuner.emulate.served import ServedModel
from slotune.tuner.emulate.settings import ServerSettings
from slotune.tuner.emulate.sglang_api import SglangServerInfo, sglang_routes
from slotune.tuner.emulate.sglang_metrics import SglangMetrics, SglangStatic
from slotune.tuner.emulate.trtllm_metrics import TrtllmMetrics, TrtllmStatic
from slotune.tuner.emulate.vllm_metrics import (
    CacheConfigInfo,
    VllmMetrics,
    cache_config_labels,
)
from slotune.tuner.engines.base import EngineConfig, ResolvedConfig
from slotune.tuner.sim.config import Engine, ResolvedTrtllm, ResolvedVllm, VllmConfig
from slotune.tuner.sim.flags import check_vllm_flags
from slotune.tuner.sim.memory import KvCapacity


@dataclass(frozen=True, slots=True)
class FaceInputs:
    """What a face builds its server from.

    Attributes:
        config: the engine flags as given (names the model as the user did).
        resolved: the same with the engine's defaults filled in.
        capacity: the KV cache the engine allocated.
        num_kv_blocks: KV blocks in the engine core.
        cuda_graph: the engine decodes on CUDA graphs (it does not run eager).
        settings: the server's own flags.
        version: slotune's version (``/version``).
    """

    config: EngineConfig
    resolved: ResolvedConfig
    capacity: KvCapacity
    num_kv_blocks: int
    cuda_graph: bool
    settings: ServerSettings
    version: str


def _no_check(_: Sequence[str], __: ServerSettings) -> None:
    """Engines whose flag parser alone decides what it accepts."""


@dataclass(frozen=True, slots=True)
class EngineFace:
    """One engine as the emulator shows it.

    The engine's flags, their help and its name are its adapter's (:mod:`tuner.engines`).

    Attributes:
        prometheus_path: where the engine serves Prometheus text.
        build: the server's engine-specific parts.
        check_flags: refuses, in the engine's words, flags its release no longer has.
    """

    prometheus_path: str
    build: Callable[[FaceInputs], Served]
    check_flags: Callable[[Sequence[str], ServerSettings], None] = _no_check


def gpu_memory_used_bytes(cap: KvCapacity) -> int:
    """The engine's whole footprint on one GPU: weights, activations, graphs, KV, the rest."""
    return (
        cap.weights_bytes
        + cap.activation_bytes
        + cap.cuda_graph_bytes
        + cap.available_kv_bytes
        + cap.non_torch_bytes
    )


def _check_vllm(argv: Sequence[str], settings: ServerSettings) -> None:
    check_vllm_flags(argv, settings.vllm_version)


def _vllm(inputs: FaceInputs) -> Served:
    resolved = inputs.resolved
    if not isinstance(resolved, ResolvedVllm):
        raise TypeError(f"the vLLM face needs a vLLM configuration, got {type(resolved)}")
    # vLLM serves under the --model value as given unless --served-model-name says else.
    config = inputs.config
    given_name = config.served_model_name if isinstance(config, VllmConfig) else None
    served_name = given_name or config.model
    model = ServedModel(
        served_name, resolved.model.hf_name, resolved.max_model_len, "vllm", inputs.version
    )
    cache_config = CacheConfigInfo(
        block_size=resolved.block_size,
        cache_dtype=resolved.kv_cache_dtype,
        enable_prefix_caching=resolved.enable_prefix_caching,
        gpu_memory_utilization=resolved.gpu_memory_utilization,
        num_gpu_blocks=inputs.num_kv_blocks,
        max_model_len=resolved.max_model_len,
    )
    version = inputs.settings.vllm_version
    exporter = VllmMetrics(
        served_name,
        resolved.max_model_len,
        cache_config_labels(cache_config, version),
        vllm_version=version,
    )
    return vllm_served(model, exporter)


def vllm_served(model: ServedModel, exporter: VllmMetrics) -> Served:
    """``vllm serve``'s routes: the OpenAI ones, ``/version`` and ``/metrics``."""

    def routes(r: EngineRoutes) -> list[web.RouteDef]:
        return [
            *r.openai_routes(),
            web.get("/version", r.version),
            web.get("/metrics", r.prometheus),
        ]

    return Served("vLLM", model, exporter, routes)


def _trtllm(inputs: FaceInputs) -> Served:
    resolved = inputs.resolved
    if not isinstance(resolved, ResolvedTrtllm):
        raise TypeError(f"the TensorRT-LLM face needs its configuration, got {type(resolved)}")
    model = ServedModel(
        inputs.config.model,
        resolved.model.hf_name,
        resolved.max_seq_len,
        "tensorrt_llm",
        inputs.version,
    )
    static = TrtllmStatic(
        max_batch_size=resolved.max_batch_size,
        max_num_tokens=resolved.max_num_tokens,
        tokens_per_block=resolved.tokens_per_block,
        gpu_mem_usage_bytes=gpu_memory_used_bytes(inputs.capacity),
    )
    return trtllm_served(model, TrtllmMetrics(model.served_name, static))


def trtllm_served(model: ServedModel, exporter: TrtllmMetrics) -> Served:
    """``trtllm-serve``'s routes: iteration stats on ``/metrics``, Prometheus text beside."""

    async def iteration_stats(_: web.Request) -> web.Response:
        return web.json_response(exporter.drain_iterations())

    def routes(r: EngineRoutes) -> list[web.RouteDef]:
        return [
            *r.openai_routes(),
            web.get("/version", r.version),
            web.get("/metrics", iteration_stats),
            web.get("/prometheus/metrics", r.prometheus),
        ]

    return Served("TensorRT-LLM", model, exporter, routes)


def _sglang(inputs: FaceInputs) -> Served:
    # SGLang serves under --model-path as given (the emulator takes no --served-model-name).
    resolved = inputs.resolved
    model = ServedModel(
        inputs.config.model,
        resolved.model.hf_name,
        inputs.capacity.max_model_len,
        "sglang",
        inputs.version,
    )
    args = {k: v for k, v in resolved.to_dict().items() if k not in ("engine", "model", "gpu")}
    server_args = {"model_path": inputs.config.model, "served_model_name": model.served_name}
    return sglang_served(
        model,
        inputs.capacity,
        {**server_args, **args},
        cuda_graph=inputs.cuda_graph,
        gpu_mem_bytes=resolved.gpu.mem_bytes,
    )


def sglang_served(
    model: ServedModel,
    capacity: KvCapacity,
    server_args: Mapping[str, Any],
    *,
    cuda_graph: bool,
    gpu_mem_bytes: int,
) -> Served:
    """SGLang's server: its native routes beside the OpenAI ones, its ``/metrics``.

    Args:
        model: the model card (``max_model_len`` is SGLang's context length).
        capacity: the KV pool (tokens, memory) SGLang reports at start-up.
        server_args: SGLang's server arguments by their own names (``/server_info``);
            ``page_size`` is SGLang's page (the simulated KV block may be coarser).
        cuda_graph: decode steps run on CUDA graphs.
        gpu_mem_bytes: the GPU's memory, free when SGLang starts (CUDA's context aside).
    """
    static = SglangStatic(
        context_len=model.max_model_len,
        page_size=int(server_args.get("page_size", capacity.block_size)),
        max_total_num_tokens=capacity.num_tokens,
        weight_bytes=capacity.weights_bytes,
        kv_cache_bytes=capacity.available_kv_bytes,
        cuda_graph_bytes=capacity.cuda_graph_bytes,
        available_bytes=gpu_mem_bytes - capacity.non_torch_bytes,
        cuda_graph=cuda_graph,
    )
    exporter = SglangMetrics(model.served_name, static)

    def routes(r: EngineRoutes) -> list[web.RouteDef]:
        info = SglangServerInfo(server_args, capacity.num_tokens)
        native = sglang_routes(r, info)
        return [*r.generation_routes(), *native, web.get("/metrics", r.prometheus)]

    return Served("SGLang", model, exporter, routes, middlewares=(exporter.middleware,))


FACES: dict[str, EngineFace] = {
    Engine.VLLM: EngineFace("/metrics", _vllm, _check_vllm),
    Engine.TRTLLM: EngineFace("/prometheus/metrics", _trtllm),
    Engine.SGLANG: EngineFace("/metrics", _sglang),
}
"""The emulated engines, keyed by the ``Engine`` value."""


def face_of(engine: str) -> EngineFace:
    """The face of ``engine`` (an ``Engine`` value).

    Raises:
        ConfigError: the emulator does not emulate that engine.
    """
    try:
        return FACES[engine]
    except KeyError:
        raise ConfigError(
            f"--engine {engine!r} is not emulated; use one of {', '.join(FACES)}"
        ) from None
