"""GPU memory at engine start: weights, activation and CUDA-graph reserves, and KV blocks.

vLLM (V1) sizes its KV cache as ``gpu_memory_utilization * total`` minus the weights, the
activation peak of a profiling forward pass over ``max_num_batched_tokens`` tokens, memory
outside PyTorch (CUDA/NCCL buffers) and its CUDA graph estimate. TensorRT-LLM gives the KV cache
``free_gpu_memory_fraction`` of the memory still free after weights, activations and graphs.
The caller names the rule (:class:`KvBudget`, an engine adapter's ``kv_budget``); an adapter may
also size its cache itself. Everything is per tensor-parallel rank: each rank holds ``1/TP`` of the weights and of the KV
heads, and every rank has the same number of blocks. Start-up failures raise
:class:`~collector.errors.EngineConfigError` worded like the engine's own error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.collector.vocabulary import DEFAULT_ENGINE
from slotune.tuner.sim.catalog import GPU, ModelSpec
from slotune.tuner.sim.cost_coeffs import GIB, Calibration, load_calibration

DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 256
_FP32_BYTES = 4
_FP8_KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2")
MIN_REQUESTS_IN_KV = 4
"""Fewer requests than this fitting in the KV cache at once is warned about: the engine then
serves them nearly one at a time, whatever its batch limits say."""


class KvBudget(StrEnum):
    """How an engine's memory fraction sizes its KV cache."""

    SHARE_OF_TOTAL = "share_of_total"
    """The instance may use this share of all GPU memory; the cache gets what the weights,
    activations and graphs leave of it, and the engine refuses to start when one
    maximum-length sequence does not fit (vLLM's ``gpu_memory_utilization``)."""
    SHARE_OF_FREE = "share_of_free"
    """The cache gets this share of the memory still free after weights, activations and
    graphs (TensorRT-LLM's ``kv_cache_config.free_gpu_memory_fraction``)."""


@dataclass(frozen=True, slots=True)
class KvCapacity:
    """The KV cache an engine would allocate, per tensor-parallel rank.

    Attributes:
        num_blocks: KV blocks (the same on every rank).
        num_tokens: ``num_blocks * block_size``.
        kv_bytes_per_token: K and V bytes of one token over all layers on one rank.
        weights_bytes: model weights on one rank.
        activation_bytes: activation peak reserved for a ``max_num_batched_tokens`` forward.
        cuda_graph_bytes: CUDA graph pool (0 with ``enforce_eager``).
        available_kv_bytes: memory left for the KV cache.
        max_concurrency: ``num_tokens / max_model_len`` (vLLM's "Maximum concurrency").
        non_torch_bytes: CUDA context, NCCL and other memory outside PyTorch.
        block_size: tokens per KV block.
        max_model_len: the longest sequence the engine accepts.
        engine: ``vllm`` or ``trtllm``.
    """

    num_blocks: int
    num_tokens: int
    kv_bytes_per_token: int
    weights_bytes: int
    activation_bytes: int
    cuda_graph_bytes: int
    available_kv_bytes: int
    max_concurrency: float
    non_torch_bytes: int = 0
    block_size: int = 16
    max_model_len: int = 0
    engine: str = DEFAULT_ENGINE


def validate_tensor_parallel(model: ModelSpec, tensor_parallel_size: int) -> None:
    """Refuses a tensor-parallel size the engine would refuse.

    Raises:
        EngineConfigError: size below 1 or not dividing the attention heads.
    """
    if tensor_parallel_size < 1:
        raise EngineConfigError(f"tensor_parallel_size must be >= 1, got {tensor_parallel_size}")
    if model.num_heads % tensor_parallel_size:
        raise EngineConfigError(
            f"Total number of attention heads ({model.num_heads}) must be divisible by tensor "
            f"parallel size ({tensor_parallel_size})."
        )


def kv_dtype_bytes(model: ModelSpec, kv_cache_dtype: str) -> int:
    """Bytes per KV element for vLLM's ``kv_cache_dtype`` values.

    Raises:
        ConfigError: a value other than ``auto`` or an fp8 variant.
    """
    if kv_cache_dtype == "auto":
        return model.dtype_bytes
    if kv_cache_dtype in _FP8_KV_DTYPES:
        return 1
    raise ConfigError(
        f"unknown kv_cache_dtype {kv_cache_dtype!r}; use one of: auto, {', '.join(_FP8_KV_DTYPES)}"
    )


def kv_bytes_per_token(
    model: ModelSpec, tensor_parallel_size: int = 1, kv_cache_dtype: str = "auto"
) -> int:
    """K and V bytes of one token over all layers on one tensor-parallel rank.

    ``2 * layers * kv_heads / TP * head_dim * dtype bytes``; KV heads are replicated, not
    split, when there are fewer of them than ranks (as vLLM does).
    """
    kv_heads = max(1, model.num_kv_heads // tensor_parallel_size)
    return 2 * model.num_layers * kv_heads * model.head_dim * kv_dtype_bytes(model, kv_cache_dtype)


def activation_bytes(
    model: ModelSpec,
    calibration: Calibration,
    tensor_parallel_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
) -> int:
    """Activation peak of the profiling forward pass plus the sampler's logits, one rank."""
    knobs = calibration.memory
    tp = tensor_parallel_size
    if model.is_moe:
        mlp_width = model.num_active_experts * model.moe_intermediate_size
    else:
        mlp_width = model.intermediate_size
    qkv_width = (model.num_heads + 2 * model.num_kv_heads) * model.head_dim
    per_token = 3 * mlp_width / tp + qkv_width / tp + knobs.hidden_buffers * model.hidden_size
    forward = max_num_batched_tokens * per_token * model.dtype_bytes
    sampler = max_num_seqs * model.vocab_size * _FP32_BYTES * knobs.sampler_logit_copies
    return int(forward + sampler)


def gib_text(num_bytes: float) -> str:
    """Bytes as the engines log them: ``12.34 GiB``."""
    return f"{num_bytes / GIB:.2f} GiB"


def _check_weights_fit(model: ModelSpec, gpu: GPU, tp: int, weights: int, non_torch: int) -> None:
    if weights + non_torch > gpu.mem_bytes:
        raise EngineConfigError(
            f"CUDA out of memory while loading the model weights: {model.id} needs "
            f"{gib_text(weights)} of weights per GPU with tensor_parallel_size={tp}, but GPU 0 has "
            f"a total capacity of {gib_text(gpu.mem_bytes)}. Increase `tensor_parallel_size`, use "
            f"a GPU with more memory, or serve a quantized model."
        )


def _share_of_total(gpu: GPU, gpu_memory_utilization: float, used: int) -> int:
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise EngineConfigError(
            f"GPU memory utilization must be within (0, 1]. Got {gpu_memory_utilization}."
        )
    available = int(gpu.mem_bytes * gpu_memory_utilization) - used
    if available <= 0:
        raise EngineConfigError(
            "No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
    return available


def _share_of_free(free_gpu_memory_fraction: float, free_bytes: int) -> int:
    if not 0.0 < free_gpu_memory_fraction <= 1.0:
        raise EngineConfigError(
            "kv_cache_config.free_gpu_memory_fraction must be within (0, 1], got "
            f"{free_gpu_memory_fraction}"
        )
    available = int(free_bytes * free_gpu_memory_fraction)
    if available <= 0:
        raise EngineConfigError(
            "Not enough GPU memory left for the KV cache after loading the weights "
            f"({gib_text(free_bytes)} free). Increase kv_cache_config.free_gpu_memory_fraction, "
            "reduce max_num_tokens or use more GPUs (tensor_parallel_size)."
        )
    return available


def _check_max_model_len(
    model: ModelSpec,
    max_model_len: int,
    num_blocks: int,
    block_size: int,
    page_bytes: int,
    available: int,
) -> None:
    needed = math.ceil(max_model_len / block_size) * page_bytes
    if needed > available:
        raise EngineConfigError(
            f"To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({gib_text(needed)} KV cache is needed, which is larger than the available KV cache "
            f"memory ({gib_text(available)}). Based on the available memory, the estimated maximum "
            f"model length is {num_blocks * block_size}. Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
            "engine."
        )


def kv_capacity(
    model: ModelSpec,
    gpu: GPU,
    *,
    tensor_parallel_size: int = 1,
    gpu_memory_utilization: float = 0.9,
    free_gpu_memory_fraction: float = 0.9,
    budget: KvBudget,
    engine: str = DEFAULT_ENGINE,
    memory_fraction: float | None = None,
    block_size: int = 16,
    kv_cache_dtype: str = "auto",
    quantization: str | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    max_num_batched_tokens: int | None = None,
    enforce_eager: bool = False,
    calibration: Calibration | None = None,
) -> KvCapacity:
    """The KV cache an engine allocates at start for this model, GPU and configuration.

    Args:
        model: the model.
        gpu: the GPU (every rank alike).
        tensor_parallel_size: GPUs the model is sharded over.
        gpu_memory_utilization: vLLM's fraction of total memory the instance may use.
        free_gpu_memory_fraction: TensorRT-LLM's fraction of the memory free after weights
            and activations that goes to the KV cache.
        budget: how the memory fraction sizes the cache (the engine adapter's
            ``kv_budget``).
        engine: the engine the cache is for (names the capacity's log lines).
        memory_fraction: the fraction ``budget`` applies; by default
            ``gpu_memory_utilization`` for a share of the total, else
            ``free_gpu_memory_fraction``.
        block_size: tokens per KV block (TensorRT-LLM's ``tokens_per_block``).
        kv_cache_dtype: ``auto`` or ``fp8`` (fp8 halves a 16-bit cache).
        quantization: the weights' quantization (``fp8``); None: the checkpoint's dtype.
        max_model_len: longest sequence; the model's ``max_position_embeddings`` by default.
        max_num_seqs: sequences per step (sizes the sampler's logits).
        max_num_batched_tokens: tokens per step (sizes the activation peak); 8,192 by default.
        enforce_eager: no CUDA graphs, so no graph pool.
        calibration: memory knobs; the bundled ones by default.

    Returns:
        The allocation, per rank.

    Raises:
        EngineConfigError: weights do not fit, no memory is left for KV blocks, or one
            ``max_model_len`` sequence does not fit (vLLM), worded like the engine.
        ConfigError: unknown ``kv_cache_dtype``.
    """
    if memory_fraction is None:
        memory_fraction = (
            gpu_memory_utilization
            if budget is KvBudget.SHARE_OF_TOTAL
            else free_gpu_memory_fraction
        )
    if block_size < 1:
        raise EngineConfigError(f"block_size must be a positive integer, got {block_size}")
    validate_tensor_parallel(model, tensor_parallel_size)
    calibration = calibration or load_calibration()
    knobs = calibration.memory
    tp = tensor_parallel_size
    max_len = max_model_len or model.max_position_embeddings
    if max_len > model.max_position_embeddings:
        raise EngineConfigError(
            f"User-specified max_model_len ({max_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={model.max_position_embeddings} in "
            f"model's config.json). Decrease `max_model_len` to at most "
            f"{model.max_position_embeddings}."
        )
    weights = model.weight_bytes_at(quantization) // tp
    non_torch = knobs.non_torch_bytes + (tp - 1) * knobs.non_torch_per_extra_rank_bytes
    _check_weights_fit(model, gpu, tp, weights, non_torch)
    batched = max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    activation = activation_bytes(model, calibration, tp, batched, max_num_seqs)
    graphs = (
        0
        if enforce_eager
        else (knobs.cuda_graph_base_bytes + model.num_layers * knobs.cuda_graph_per_layer_bytes)
    )
    used = weights + non_torch + activation + graphs
    is_total = budget is KvBudget.SHARE_OF_TOTAL
    if is_total:
        available = _share_of_total(gpu, memory_fraction, used)
    else:
        available = _share_of_free(memory_fraction, gpu.mem_bytes - used)
    per_token = kv_bytes_per_token(model, tp, kv_cache_dtype)
    page = per_token * block_size
    num_blocks = available // page
    if num_blocks <= 0 and is_total:
        _share_of_total(gpu, memory_fraction, gpu.mem_bytes)
    if num_blocks <= 0:
        _share_of_free(memory_fraction, 0)
    if is_total:
        _check_max_model_len(model, max_len, num_blocks, block_size, page, available)
    num_tokens = num_blocks * block_size
    return KvCapacity(
        num_blocks=num_blocks,
        num_tokens=num_tokens,
        kv_bytes_per_token=per_token,
        weights_bytes=weights,
        activation_bytes=activation,
        cuda_graph_bytes=graphs,
        available_kv_bytes=available,
        max_concurrency=num_tokens / max_len,
        non_torch_bytes=non_torch,
        block_size=block_size,
        max_model_len=max_len,
        engine=str(engine),
    )


def kv_room_warning(
    cap: KvCapacity, tokens_per_request: float, what: str, knobs: str
) -> str | None:
    """A warning when the KV cache holds fewer than ``MIN_REQUESTS_IN_KV`` requests at once.

    Args:
        cap: the allocation from :func:`kv_capacity`.
        tokens_per_request: prompt + output tokens of a typical request.
        what: where ``tokens_per_request`` comes from, for the message.
        knobs: the engine's settings that give the cache more room, in its own names.

    Returns:
        The warning, naming the cache size, the room in requests and the knobs to turn;
        None when there is room for at least ``MIN_REQUESTS_IN_KV``.
    """
    if tokens_per_request <= 0:
        return None
    room = cap.num_tokens / tokens_per_request
    if room >= MIN_REQUESTS_IN_KV:
        return None
    return (
        f"The KV cache holds only {cap.num_tokens:,} tokens: room for {room:.1f} requests of "
        f"{tokens_per_request:,.0f} tokens ({what}) at once, whatever the batch limits say. "
        f"The activation reserve takes {gib_text(cap.activation_bytes)}; {knobs}, or use more "
        "GPUs (tensor_parallel_size)."
    )
