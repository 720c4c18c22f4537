"""Engine configurations with the engines' own parameter names, defaults and validation.

A config holds what the user set (``None`` = the engine's default); :func:`resolve` fills
the defaults the way the engine does for the given GPU and model, and refuses what the
engine refuses, with the engine's wording.

vLLM defaults are those of ``vllm serve`` (the OpenAI API server usage context) in the V1
engine: chunked prefill and prefix caching on, ``block_size`` 16,
``gpu_memory_utilization`` 0.9, and batch limits that depend on the GPU: on GPUs with at
least 70 GiB that are not A100s, ``max_num_batched_tokens`` 8192 and ``max_num_seqs`` 1024,
elsewhere 2048 and 256. With chunked prefill off, an unset ``max_num_batched_tokens``
becomes ``max(max_model_len, that default)`` so that a whole prompt always fits.

TensorRT-LLM defaults are those of ``trtllm-serve``: ``max_batch_size`` 2048,
``max_num_tokens`` 8192, chunked prefill off, ``kv_cache_config.free_gpu_memory_fraction``
0.9, ``enable_block_reuse`` on, ``tokens_per_block`` 32, capacity scheduler policy
``GUARANTEED_NO_EVICT``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.collector.vocabulary import Engine as Engine
from slotune.tuner.sim.catalog import GPU, ModelSpec, get_gpu, get_model


VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128)
VLLM_KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
VLLM_SCHEDULING_POLICIES = ("fcfs", "priority")
TRTLLM_CAPACITY_POLICIES = ("GUARANTEED_NO_EVICT", "MAX_UTILIZATION")
TRTLLM_KV_CACHE_DTYPES = ("auto", "fp8")
_GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class VllmConfig:
    """``vllm serve`` engine arguments the simulator models (None = vLLM's default)."""

    model: str
    gpu: str
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    long_prefill_token_threshold: int | None = None
    max_num_partial_prefills: int | None = None
    max_long_partial_prefills: int | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int | None = None
    kv_cache_dtype: str | None = None
    enforce_eager: bool = False
    scheduling_policy: str | None = None
    served_model_name: str | None = None

    @property
    def engine(self) -> Engine:
        return Engine.VLLM


@dataclass(frozen=True, slots=True)
class TrtllmConfig:
    """``trtllm-serve`` options and LLM API options the simulator models (None = default)."""

    model: str
    gpu: str
    max_batch_size: int | None = None
    max_num_tokens: int | None = None
    max_seq_len: int | None = None
    tensor_parallel_size: int | None = None
    enable_chunked_prefill: bool | None = None
    free_gpu_memory_fraction: float | None = None
    enable_block_reuse: bool | None = None
    tokens_per_block: int | None = None
    kv_cache_dtype: str | None = None
    capacity_scheduler_policy: str | None = None

    @property
    def engine(self) -> Engine:
        return Engine.TRTLLM


EngineConfig = VllmConfig | TrtllmConfig


@dataclass(frozen=True, slots=True)
class ResolvedVllm:
    """A vLLM configuration with every default filled in and validated."""

    model: ModelSpec
    gpu: GPU
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    long_prefill_token_threshold: int
    max_num_partial_prefills: int
    max_long_partial_prefills: int
    block_size: int
    gpu_memory_utilization: float
    tensor_parallel_size: int
    kv_cache_dtype: str
    enforce_eager: bool
    scheduling_policy: str
    served_model_name: str

    @property
    def engine(self) -> Engine:
        return Engine.VLLM

    def to_dict(self) -> dict[str, Any]:
        """Engine parameters by vLLM's names, plus ``engine``, ``model`` and ``gpu`` ids."""
        out: dict[str, Any] = {"engine": "vllm", "model": self.model.id, "gpu": self.gpu.id}
        for f in dataclasses.fields(self):
            if f.name not in ("model", "gpu"):
                out[f.name] = getattr(self, f.name)
        return out


@dataclass(frozen=True, slots=True)
class ResolvedTrtllm:
    """A TensorRT-LLM configuration with every default filled in and validated."""

    model: ModelSpec
    gpu: GPU
    max_batch_size: int
    max_num_tokens: int
    max_seq_len: int
    tensor_parallel_size: int
    enable_chunked_prefill: bool
    free_gpu_memory_fraction: float
    enable_block_reuse: bool
    tokens_per_block: int
    kv_cache_dtype: str
    capacity_scheduler_policy: str

    @property
    def engine(self) -> Engine:
        return Engine.TRTLLM

    def to_dict(self) -> dict[str, Any]:
        """Engine parameters by TensorRT-LLM's (dotted LLM API) names."""
        out: dict[str, Any] = {"engine": "trtllm", "model": self.model.id, "gpu": self.gpu.id}
        for f in dataclasses.fields(self):
            if f.name not in ("model", "gpu"):
                out[TRTLLM_PARAM_NAMES[f.name]] = getattr(self, f.name)
        return out


ResolvedConfig = ResolvedVllm | ResolvedTrtllm

TRTLLM_PARAM_NAMES = {
    "max_batch_size": "max_batch_size",
    "max_num_tokens": "max_num_tokens",
    "max_seq_len": "max_seq_len",
    "tensor_parallel_size": "tensor_parallel_size",
    "enable_chunked_prefill": "enable_chunked_prefill",
    "free_gpu_memory_fraction": "kv_cache_config.free_gpu_memory_fraction",
    "enable_block_reuse": "kv_cache_config.enable_block_reuse",
    "tokens_per_block": "kv_cache_config.tokens_per_block",
    "kv_cache_dtype": "kv_cache_config.dtype",
    "capacity_scheduler_policy": "scheduler_config.capacity_scheduler_policy",
}


def config_from_params(
    engine: str, model: str, gpu: str, params: Mapping[str, Any]
) -> EngineConfig:
    """Build a config from parameters named as the engine names them.

    vLLM takes its argument names (``max_num_seqs``); TensorRT-LLM its LLM API names,
    dotted for nested options (``kv_cache_config.enable_block_reuse``).

    Raises:
        ConfigError: unknown engine or parameter name.
    """
    if engine == Engine.VLLM:
        names = {f.name: f.name for f in dataclasses.fields(VllmConfig)}
        cls: type[VllmConfig] | type[TrtllmConfig] = VllmConfig
    elif engine == Engine.TRTLLM:
        names = {v: k for k, v in TRTLLM_PARAM_NAMES.items()}
        cls = TrtllmConfig
    else:
        raise ConfigError(f"engine {engine!r} is not simulated; use vllm or trtllm")
    kwargs: dict[str, Any] = {}
    for key, value in params.items():
        field = names.get(key)
        if field is None or field in ("model", "gpu"):
            raise ConfigError(
                f"{key!r} is not a {engine} parameter the simulator knows; "
                f"known: {', '.join(k for k in names if k not in ('model', 'gpu'))}"
            )
        kwargs[field] = value
    return cls(model=model, gpu=gpu, **kwargs)


def resolve(config: EngineConfig) -> ResolvedConfig:
    """Fill in the engine's defaults for this GPU and model and validate like the engine.

    Raises:
        ConfigError: unknown GPU or model id.
        EngineConfigError: a combination the engine refuses at start.
    """
    model = get_model(config.model)
    gpu = get_gpu(config.gpu)
    if isinstance(config, VllmConfig):
        return _resolve_vllm(config, model, gpu)
    return _resolve_trtllm(config, model, gpu)


def _is_large_gpu(gpu: GPU) -> bool:
    # vLLM's get_batch_defaults: larger batch defaults on >= 70 GiB devices except A100s,
    # where a large token budget was measured to lower throughput.
    return gpu.mem_bytes >= 70 * _GIB and "a100" not in gpu.id


def _resolve_vllm(c: VllmConfig, model: ModelSpec, gpu: GPU) -> ResolvedVllm:
    large = _is_large_gpu(gpu)
    chunked = True if c.enable_chunked_prefill is None else c.enable_chunked_prefill
    max_model_len = c.max_model_len or model.max_position_embeddings
    if max_model_len > model.max_position_embeddings:
        raise EngineConfigError(
            f"User-specified max_model_len ({max_model_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={model.max_position_embeddings} in "
            "model's config.json). This may lead to incorrect model outputs or CUDA errors. "
            "Lower --max-model-len."
        )
    max_num_seqs = c.max_num_seqs if c.max_num_seqs is not None else (1024 if large else 256)
    if c.max_num_batched_tokens is not None:
        budget = c.max_num_batched_tokens
    else:
        budget = 8192 if large else 2048
        if not chunked:
            budget = max(max_model_len, budget)
        budget = min(max_num_seqs * max_model_len, budget)
    partial = c.max_num_partial_prefills if c.max_num_partial_prefills is not None else 1
    long_partial = c.max_long_partial_prefills if c.max_long_partial_prefills is not None else 1
    threshold = c.long_prefill_token_threshold or 0
    if partial > 1 and threshold == 0:
        threshold = int(max_model_len * 0.04)
    r = ResolvedVllm(
        model=model,
        gpu=gpu,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget,
        max_model_len=max_model_len,
        enable_chunked_prefill=chunked,
        enable_prefix_caching=True if c.enable_prefix_caching is None else c.enable_prefix_caching,
        long_prefill_token_threshold=threshold,
        max_num_partial_prefills=partial,
        max_long_partial_prefills=long_partial,
        block_size=c.block_size if c.block_size is not None else 16,
        gpu_memory_utilization=(
            c.gpu_memory_utilization if c.gpu_memory_utilization is not None else 0.9
        ),
        tensor_parallel_size=c.tensor_parallel_size or 1,
        kv_cache_dtype=c.kv_cache_dtype or "auto",
        enforce_eager=c.enforce_eager,
        scheduling_policy=c.scheduling_policy or "fcfs",
        served_model_name=c.served_model_name or model.hf_name,
    )
    _validate_vllm(r)
    return r


def _validate_vllm(r: ResolvedVllm) -> None:
    checks: list[tuple[bool, str]] = [
        (r.max_num_seqs < 1, f"max_num_seqs ({r.max_num_seqs}) must be at least 1."),
        (
            r.max_num_batched_tokens < r.max_model_len and not r.enable_chunked_prefill,
            f"max_num_batched_tokens ({r.max_num_batched_tokens}) is smaller than max_model_len "
            f"({r.max_model_len}). This effectively limits the maximum sequence length to "
            "max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
            "max_num_batched_tokens or decrease max_model_len.",
        ),
        (
            r.max_num_batched_tokens < r.max_num_seqs,
            f"max_num_batched_tokens ({r.max_num_batched_tokens}) must be greater than or equal "
            f"to max_num_seqs ({r.max_num_seqs}).",
        ),
        (
            r.max_num_partial_prefills < 1,
            f"max_num_partial_prefills ({r.max_num_partial_prefills}) must be greater than or "
            "equal to 1.",
        ),
        (
            r.max_num_partial_prefills > 1 and not r.enable_chunked_prefill,
            "Chunked prefill must be enabled to set max_num_partial_prefills > 1.",
        ),
        (
            r.long_prefill_token_threshold > r.max_model_len,
            f"long_prefill_token_threshold ({r.long_prefill_token_threshold}) cannot be greater "
            f"than the max_model_len ({r.max_model_len}).",
        ),
        (
            r.long_prefill_token_threshold < 0,
            f"long_prefill_token_threshold ({r.long_prefill_token_threshold}) must be at least 0.",
        ),
        (
            not 1 <= r.max_long_partial_prefills <= r.max_num_partial_prefills,
            f"max_long_partial_prefills ({r.max_long_partial_prefills}) must be greater than or "
            "equal to 1 and less than or equal to max_num_partial_prefills "
            f"({r.max_num_partial_prefills}).",
        ),
        (
            r.block_size not in VLLM_BLOCK_SIZES,
            f"argument --block-size: invalid choice: {r.block_size} (choose from "
            f"{', '.join(map(str, VLLM_BLOCK_SIZES))})",
        ),
        (
            not 0 < r.gpu_memory_utilization <= 1,
            f"GPU memory utilization must be in (0, 1]. Got {r.gpu_memory_utilization}.",
        ),
        (
            r.kv_cache_dtype not in VLLM_KV_CACHE_DTYPES,
            f"argument --kv-cache-dtype: invalid choice: '{r.kv_cache_dtype}' (choose from "
            f"{', '.join(repr(d) for d in VLLM_KV_CACHE_DTYPES)})",
        ),
        (
            r.scheduling_policy not in VLLM_SCHEDULING_POLICIES,
            f"argument --scheduling-policy: invalid choice: '{r.scheduling_policy}' (choose "
            "from 'fcfs', 'priority')",
        ),
    ]
    for failed, message in checks:
        if failed:
            raise EngineConfigError(message)
    _validate_tp(r.model, r.tensor_parallel_size)


def _validate_tp(model: ModelSpec, tp: int) -> None:
    if tp < 1:
        raise EngineConfigError(f"tensor_parallel_size ({tp}) must be at least 1.")
    if model.num_heads % tp:
        raise EngineConfigError(
            f"Total number of attention heads ({model.num_heads}) must be divisible by tensor "
            f"parallel size ({tp})."
        )


def _resolve_trtllm(c: TrtllmConfig, model: ModelSpec, gpu: GPU) -> ResolvedTrtllm:
    r = ResolvedTrtllm(
        model=model,
        gpu=gpu,
        max_batch_size=c.max_batch_size if c.max_batch_size is not None else 2048,
        max_num_tokens=c.max_num_tokens if c.max_num_tokens is not None else 8192,
        max_seq_len=c.max_seq_len or model.max_position_embeddings,
        tensor_parallel_size=c.tensor_parallel_size or 1,
        enable_chunked_prefill=bool(c.enable_chunked_prefill),
        free_gpu_memory_fraction=(
            c.free_gpu_memory_fraction if c.free_gpu_memory_fraction is not None else 0.9
        ),
        enable_block_reuse=True if c.enable_block_reuse is None else c.enable_block_reuse,
        tokens_per_block=c.tokens_per_block if c.tokens_per_block is not None else 32,
        kv_cache_dtype=c.kv_cache_dtype or "auto",
        capacity_scheduler_policy=c.capacity_scheduler_policy or "GUARANTEED_NO_EVICT",
    )
    checks: list[tuple[bool, str]] = [
        (r.max_batch_size < 1, f"max_batch_size must be at least 1, got {r.max_batch_size}"),
        (r.max_num_tokens < 1, f"max_num_tokens must be at least 1, got {r.max_num_tokens}"),
        (
            r.max_seq_len > model.max_position_embeddings,
            f"max_seq_len ({r.max_seq_len}) is larger than the model's max_position_embeddings "
            f"({model.max_position_embeddings}); lower --max_seq_len",
        ),
        (
            not 0 < r.free_gpu_memory_fraction <= 1,
            "kv_cache_config.free_gpu_memory_fraction must be in (0, 1], got "
            f"{r.free_gpu_memory_fraction}",
        ),
        (
            r.tokens_per_block < 1 or r.tokens_per_block & (r.tokens_per_block - 1) != 0,
            f"kv_cache_config.tokens_per_block must be a power of 2, got {r.tokens_per_block}",
        ),
        (
            r.capacity_scheduler_policy not in TRTLLM_CAPACITY_POLICIES,
            "scheduler_config.capacity_scheduler_policy: Input should be "
            f"{' or '.join(repr(p) for p in TRTLLM_CAPACITY_POLICIES)}, got "
            f"{r.capacity_scheduler_policy!r}",
        ),
        (
            r.kv_cache_dtype not in TRTLLM_KV_CACHE_DTYPES,
            f"kv_cache_config.dtype: Input should be 'auto' or 'fp8', got {r.kv_cache_dtype!r}",
        ),
    ]
    for failed, message in checks:
        if failed:
            raise EngineConfigError(message)
    _validate_tp(model, r.tensor_parallel_size)
    return r
