"""SGLang (``python -m sglang.launch_server``): arguments, defaults, flags, space, export, sim.

Argument names and defaults are SGLang's own, checked against
``python/sglang/srt/server_args.py`` of sgl-project/sglang (main at commit 001067f, the
``ServerArgs`` fields of the "Memory and scheduling" and "Distributed topology" sections) and
the GPU-memory heuristics of ``ServerArgs._handle_gpu_memory_settings`` of the v0.5 series:

- ``--max-running-requests``: None; the scheduler then runs at most
  ``min(max_total_num_tokens // 2, req_to_token_pool.size)`` requests, the pool holding
  ``min(max(max_total_num_tokens / context_len * 512, 2048), 4096)`` slots
  (``tp_worker.py`` / ``model_runner.py``);
- ``--chunked-prefill-size`` (None; ``-1`` turns chunked prefill off) and
  ``--cuda-graph-max-bs`` (None) by GPU memory: < 20 GiB 2048 / 8; < 35 GiB 2048 / 24
  (80 at TP >= 4); < 60 GiB 4096 / 32 (160); < 90 GiB 8192 / 256 (512); < 160 GiB
  8192 / 256 (512); larger 16384 / 512;
- ``--mem-fraction-static`` (None): ``round((gpu_mem - reserved) / gpu_mem, 3)`` in MiB,
  ``reserved = 512 + max(chunked_prefill_size, 2048) x 1.5 + cuda_graph_max_bs x 2 +
  tp_size x pp_size / 8 x 1024`` (``max_prefill_tokens`` instead of the chunk size when
  chunking is off), at least 10 GiB on GPUs above 60 GiB;
- ``--max-prefill-tokens`` 16384; ``--schedule-policy`` fcfs (choices lpm, random, fcfs,
  dfs-weight, lof, priority, routing-key); ``--schedule-conservativeness`` 1.0;
  ``--page-size`` None (1 with the default attention backends); ``--disable-radix-cache``
  and ``--enable-mixed-chunk`` off; ``--tp-size`` (alias ``--tensor-parallel-size``) and
  ``--dp-size`` (alias ``--data-parallel-size``) 1; ``--kv-cache-dtype`` auto;
  ``--context-length`` None (the model's).

The KV pool is SGLang's ``profile_max_num_token``: ``total x mem_fraction_static`` less the
weights and the memory outside PyTorch, in whole pages. The simulator models one
data-parallel replica (``--dp-size`` 1); docs/sglang.md lists where it departs from SGLang.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.tuner.engines._args import RaisingParser, arg_type, require_model_and_gpu
from slotune.tuner.engines.base import EngineAdapter, EngineConfig, Knob, ResolvedConfig
from slotune.tuner.engines.param import Param, ParamKind, Value, choice, powers_of_two
from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.catalog import GPU, QUANTIZATIONS, ModelSpec, get_gpu, get_model
from slotune.tuner.sim.config import Engine
from slotune.tuner.sim.cost_coeffs import GIB, OverheadKnobs, load_calibration
from slotune.tuner.sim.memory import KvCapacity, kv_bytes_per_token
from slotune.tuner.sim.request import RequestRejected, SimRequest
from slotune.tuner.sim.scheduler_sglang import (
    CLIP_MAX_NEW_TOKENS,
    SCHEDULE_POLICIES,
    SglangSchedule,
    SglangScheduler,
)
from slotune.tuner.sim.view import PrefixCache, SimView

SGLANG_SCHEDULE_POLICIES = ("lpm", "random", "fcfs", "dfs-weight", "lof", "priority", "routing-key")
SGLANG_KV_CACHE_DTYPES = (
    "auto",
    "fp8_e5m2",
    "fp8_e4m3",
    "mxfp8",
    "bf16",
    "bfloat16",
    "nvfp4",
    "fp4_mx_block16",
    "fp4_e2m1",
)
SIM_KV_CACHE_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16")
"""The ``--kv-cache-dtype`` values the simulator sizes and prices."""
SIM_PAGE_TOKENS = 16
"""KV granularity of the simulation when SGLang's page is smaller (see docs/sglang.md)."""
_MIB = 1 << 20
DEFAULT_CHUNK_WHEN_ON = 8192
"""The chunk size advice turns chunked prefill back on with (SGLang's on 80-160 GiB GPUs)."""

# (below this many GiB of GPU memory, chunked_prefill_size, cuda_graph_max_bs at TP < 4,
# at TP >= 4), as _handle_gpu_memory_settings sets them.
_MEMORY_TIERS: tuple[tuple[float, int, int, int], ...] = (
    (20, 2048, 8, 8),
    (35, 2048, 24, 80),
    (60, 4096, 32, 160),
    (90, 8192, 256, 512),
    (160, 8192, 256, 512),
    (math.inf, 16384, 512, 512),
)


@dataclass(frozen=True, slots=True)
class SglangConfig(EngineConfig):
    """``python -m sglang.launch_server`` arguments the simulator models (None = SGLang's default)."""

    engine: ClassVar[Engine] = Engine.SGLANG
    model: str
    gpu: str
    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    mem_fraction_static: float | None = None
    schedule_policy: str | None = None
    schedule_conservativeness: float | None = None
    disable_radix_cache: bool = False
    cuda_graph_max_bs: int | None = None
    page_size: int | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    kv_cache_dtype: str | None = None
    context_length: int | None = None
    enable_mixed_chunk: bool = False
    quantization: str | None = None
    disable_overlap_schedule: bool = False


@dataclass(frozen=True, slots=True)
class ResolvedSglang(ResolvedConfig):
    """An SGLang configuration with every default filled in and validated.

    ``max_running_requests``, when unset, is the limit SGLang derives from the KV pool
    (:func:`max_running_requests`), or None where the pool cannot be sized here (weights that
    need a larger tensor-parallel size, which a study sets after resolving its defaults; a
    cache dtype the simulator does not size); the simulator's view derives it at start. ``chunked_prefill_size`` is -1 when chunked prefill is off.
    """

    engine: ClassVar[Engine] = Engine.SGLANG
    model: ModelSpec
    gpu: GPU
    max_running_requests: int | None
    chunked_prefill_size: int
    max_prefill_tokens: int
    mem_fraction_static: float
    schedule_policy: str
    schedule_conservativeness: float
    disable_radix_cache: bool
    cuda_graph_max_bs: int
    page_size: int
    tp_size: int
    dp_size: int
    kv_cache_dtype: str
    context_length: int
    enable_mixed_chunk: bool
    quantization: str | None
    disable_overlap_schedule: bool

    def to_dict(self) -> dict[str, Any]:
        """Arguments by SGLang's names, plus ``engine``, ``model`` and ``gpu`` ids."""
        out: dict[str, Any] = {"engine": "sglang", "model": self.model.id, "gpu": self.gpu.id}
        for f in dataclasses.fields(self):
            if f.name not in ("model", "gpu"):
                out[f.name] = getattr(self, f.name)
        return out


PARAM_NAMES = tuple(
    f.name for f in dataclasses.fields(SglangConfig) if f.name not in ("model", "gpu")
)
PARAM_ALIASES = {
    "tensor_parallel_size": "tp_size",
    "tp": "tp_size",
    "data_parallel_size": "dp_size",
    "dp": "dp_size",
}
"""Other spellings SGLang accepts for one argument; a study keeps the canonical name."""


def config_from_params(model: str, gpu: str, params: Mapping[str, Any]) -> SglangConfig:
    """A config from arguments by SGLang's names (or their aliases).

    Raises:
        ConfigError: an argument SGLang's simulation does not know.
    """
    kwargs: dict[str, Any] = {}
    for key, value in params.items():
        name = PARAM_ALIASES.get(key, key)
        if name not in PARAM_NAMES:
            raise ConfigError(
                f"{key!r} is not an sglang argument the simulator knows; known: "
                f"{', '.join(PARAM_NAMES)}"
            )
        kwargs[name] = value
    return SglangConfig(model=model, gpu=gpu, **kwargs)


# defaults
def _gpu_mem_mib(gpu: GPU) -> float:
    # get_device_memory_capacity: the device's total memory in MiB.
    return gpu.mem_bytes / _MIB


def memory_defaults(gpu: GPU, tp_size: int) -> tuple[int, int]:
    """SGLang's (chunked_prefill_size, cuda_graph_max_bs) for this GPU and TP size."""
    gib = _gpu_mem_mib(gpu) / 1024
    for below, chunk, graph_bs, graph_bs_tp4 in _MEMORY_TIERS:
        if gib < below:
            return chunk, graph_bs if tp_size < 4 else graph_bs_tp4
    raise AssertionError("the last tier has no upper bound")


def default_mem_fraction_static(
    gpu: GPU,
    *,
    chunked_prefill_size: int,
    max_prefill_tokens: int,
    cuda_graph_max_bs: int,
    tp_size: int,
) -> float:
    """SGLang's ``mem_fraction_static`` when unset: GPU memory less activations and graphs."""
    gpu_mem = _gpu_mem_mib(gpu)
    reserved = 512.0
    prefill = chunked_prefill_size if chunked_prefill_size > 0 else max_prefill_tokens
    reserved += max(prefill, 2048) * 1.5
    reserved += cuda_graph_max_bs * 2
    reserved += tp_size / 8 * 1024  # pp_size is 1
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mem - reserved) / gpu_mem, 3)


def resolve(config: SglangConfig) -> ResolvedSglang:
    """Fill in SGLang's defaults for this GPU and model and validate like SGLang.

    Raises:
        ConfigError: unknown GPU or model id.
        EngineConfigError: a combination SGLang refuses at start.
    """
    model = get_model(config.model)
    gpu = get_gpu(config.gpu)
    tp = config.tp_size if config.tp_size is not None else 1
    chunk_default, graph_default = memory_defaults(gpu, tp)
    chunk = (
        config.chunked_prefill_size if config.chunked_prefill_size is not None else chunk_default
    )
    graph_bs = config.cuda_graph_max_bs if config.cuda_graph_max_bs is not None else graph_default
    max_prefill = config.max_prefill_tokens if config.max_prefill_tokens is not None else 16384
    mfs = config.mem_fraction_static
    if mfs is None:
        mfs = default_mem_fraction_static(
            gpu,
            chunked_prefill_size=chunk,
            max_prefill_tokens=max_prefill,
            cuda_graph_max_bs=graph_bs,
            tp_size=tp,
        )
    r = ResolvedSglang(
        model=model,
        gpu=gpu,
        max_running_requests=config.max_running_requests,
        chunked_prefill_size=chunk if chunk > 0 else -1,
        max_prefill_tokens=max_prefill,
        mem_fraction_static=mfs,
        schedule_policy=config.schedule_policy or "fcfs",
        schedule_conservativeness=(
            config.schedule_conservativeness
            if config.schedule_conservativeness is not None
            else 1.0
        ),
        disable_radix_cache=config.disable_radix_cache,
        cuda_graph_max_bs=graph_bs,
        page_size=config.page_size if config.page_size is not None else 1,
        tp_size=tp,
        dp_size=config.dp_size if config.dp_size is not None else 1,
        kv_cache_dtype=config.kv_cache_dtype or "auto",
        context_length=config.context_length or model.max_position_embeddings,
        enable_mixed_chunk=config.enable_mixed_chunk,
        quantization=config.quantization,
        disable_overlap_schedule=config.disable_overlap_schedule,
    )
    _validate(r, config)
    if r.max_running_requests is not None or r.kv_cache_dtype not in SIM_KV_CACHE_DTYPES:
        return r
    try:
        pool_tokens = _pool(r)[4]
    except EngineConfigError:
        # Weights that need more GPUs than given: the limit waits for the pool at start.
        return r
    limit = max_running_requests(None, r.context_length, pool_tokens)
    return dataclasses.replace(r, max_running_requests=limit)


def _validate(r: ResolvedSglang, c: SglangConfig) -> None:
    derived = r.model.max_position_embeddings
    checks: list[tuple[bool, str]] = [
        (
            r.context_length > derived,
            f"User-specified context_length ({r.context_length}) is greater than the derived "
            f"context_length ({derived}). This may lead to incorrect model outputs or CUDA "
            "errors. Lower --context-length.",
        ),
        (
            r.max_running_requests is not None and r.max_running_requests < 1,
            f"--max-running-requests must be at least 1, got {r.max_running_requests}",
        ),
        (
            c.chunked_prefill_size is not None
            and c.chunked_prefill_size != -1
            and c.chunked_prefill_size < 1,
            f"--chunked-prefill-size must be positive or -1 (off), got {c.chunked_prefill_size}",
        ),
        (
            r.page_size >= 1
            and r.chunked_prefill_size > 0
            and r.chunked_prefill_size % r.page_size != 0,
            f"chunked_prefill_size ({r.chunked_prefill_size}) must be divisible by page_size "
            f"({r.page_size})",
        ),
        (
            r.max_prefill_tokens < 1,
            f"--max-prefill-tokens must be at least 1, got {r.max_prefill_tokens}",
        ),
        (
            not 0 < r.mem_fraction_static < 1,
            f"--mem-fraction-static must be in (0, 1), got {r.mem_fraction_static}",
        ),
        (
            r.schedule_policy not in SGLANG_SCHEDULE_POLICIES,
            f"argument --schedule-policy: invalid choice: '{r.schedule_policy}' (choose from "
            f"{', '.join(repr(p) for p in SGLANG_SCHEDULE_POLICIES)})",
        ),
        (
            not math.isfinite(r.schedule_conservativeness) or r.schedule_conservativeness <= 0,
            f"--schedule-conservativeness must be a positive number, got "
            f"{r.schedule_conservativeness}",
        ),
        (
            r.cuda_graph_max_bs < 1,
            f"--cuda-graph-max-bs must be at least 1, got {r.cuda_graph_max_bs}",
        ),
        (r.page_size < 1, f"--page-size must be at least 1, got {r.page_size}"),
        (
            r.kv_cache_dtype not in SGLANG_KV_CACHE_DTYPES,
            f"argument --kv-cache-dtype: invalid choice: '{r.kv_cache_dtype}' (choose from "
            f"{', '.join(repr(d) for d in SGLANG_KV_CACHE_DTYPES)})",
        ),
        (r.dp_size < 1, f"--dp-size must be at least 1, got {r.dp_size}"),
        (r.tp_size < 1, f"--tp-size must be at least 1, got {r.tp_size}"),
        (
            r.tp_size >= 1 and r.model.num_heads % r.tp_size != 0,
            f"Total number of attention heads ({r.model.num_heads}) must be divisible by tp "
            f"size ({r.tp_size}).",
        ),
    ]
    for failed, message in checks:
        if failed:
            raise EngineConfigError(message)


# memory
def kv_capacity(r: ResolvedSglang) -> KvCapacity:
    """SGLang's KV pool (``profile_max_num_token``), per tensor-parallel rank.

    The pool gets ``total x mem_fraction_static`` less the weights and the memory outside
    PyTorch; SGLang keeps the rest (``1 - mem_fraction_static``) for activations and CUDA
    graphs. The simulation holds it in blocks of ``max(page_size, 16)`` tokens.

    Raises:
        EngineConfigError: the weights do not fit, nothing is left for the pool, or the
            configuration asks for what the simulator does not model (``--dp-size`` above 1,
            the ``priority`` / ``routing-key`` policies, fp4 / mxfp8 caches).
    """
    _check_simulated(r)
    weights, non_torch, per_token, available, num_tokens = _pool(r)
    block = sim_block_size(r)
    num_blocks = num_tokens // block
    return KvCapacity(
        num_blocks=num_blocks,
        num_tokens=num_blocks * block,
        kv_bytes_per_token=per_token,
        weights_bytes=weights,
        activation_bytes=int(r.gpu.mem_bytes * (1 - r.mem_fraction_static)),
        cuda_graph_bytes=0,
        available_kv_bytes=available,
        max_concurrency=num_blocks * block / r.context_length,
        non_torch_bytes=non_torch,
        block_size=block,
        max_model_len=r.context_length,
        engine="vllm",
    )


def _check_simulated(r: ResolvedSglang) -> None:
    """Refuse what SGLang runs but the simulator does not model (a real engine takes it)."""
    checks: list[tuple[bool, str]] = [
        (
            r.schedule_policy not in SCHEDULE_POLICIES,
            f"--schedule-policy {r.schedule_policy} is not simulated; use one of "
            f"{', '.join(SCHEDULE_POLICIES)}",
        ),
        (
            r.kv_cache_dtype not in SIM_KV_CACHE_DTYPES,
            f"--kv-cache-dtype {r.kv_cache_dtype} is not simulated; use one of "
            f"{', '.join(SIM_KV_CACHE_DTYPES)}",
        ),
        (
            r.quantization is not None and r.quantization not in QUANTIZATIONS,
            f"--quantization {r.quantization} is not simulated; use one of "
            f"{', '.join(QUANTIZATIONS)} or leave it unset",
        ),
        (
            r.dp_size > 1,
            f"--dp-size {r.dp_size}: the simulator models one data-parallel replica; simulate "
            "several with slotune fleet simulate, or leave --dp-size at 1",
        ),
    ]
    for failed, message in checks:
        if failed:
            raise EngineConfigError(message)


def _pool(r: ResolvedSglang) -> tuple[int, int, int, int, int]:
    """(weights, memory outside PyTorch, KV bytes per token, pool bytes, pool tokens)."""
    knobs = load_calibration().memory
    tp = r.tp_size
    weights = r.model.weight_bytes_at(r.quantization) // tp
    non_torch = knobs.non_torch_bytes + (tp - 1) * knobs.non_torch_per_extra_rank_bytes
    if weights + non_torch > r.gpu.mem_bytes:
        raise EngineConfigError(
            f"Not enough memory to load {r.model.id}: {weights / GIB:.2f} GiB of weights per "
            f"GPU at --tp-size {tp} on {r.gpu.mem_bytes / GIB:.2f} GiB. Raise --tp-size or use "
            "a GPU with more memory."
        )
    per_token = kv_bytes_per_token(r.model, tp, kv_dtype_for_cost(r.kv_cache_dtype))
    available = int(r.gpu.mem_bytes * r.mem_fraction_static) - weights - non_torch
    num_tokens = max(0, available) // per_token // r.page_size * r.page_size
    if num_tokens <= 0:
        raise EngineConfigError("Not enough memory. Please try to increase --mem-fraction-static.")
    return weights, non_torch, per_token, available, num_tokens


def kv_dtype_for_cost(kv_cache_dtype: str) -> str:
    # bf16 / bfloat16 are two bytes, what "auto" gives the catalog's 16-bit models.
    return "auto" if kv_cache_dtype in ("bf16", "bfloat16") else kv_cache_dtype


def sim_block_size(r: ResolvedSglang) -> int:
    """Tokens per simulated KV block: SGLang's page, coarsened to 16 tokens when smaller."""
    return max(r.page_size, SIM_PAGE_TOKENS)


def max_running_requests(
    requested: int | None, context_length: int, max_total_num_tokens: int
) -> int:
    """The scheduler's running limit: the user's or SGLang's, capped by the request pool.

    Args:
        requested: ``--max-running-requests``; None: half the pool's tokens.
        context_length: the longest request.
        max_total_num_tokens: the KV pool's tokens.
    """
    pool = min(max(int(max_total_num_tokens / context_length * 512), 2048), 4096)
    wanted = requested if requested is not None else max_total_num_tokens // 2
    return max(1, min(wanted, pool))


def schedule_of(r: ResolvedSglang, max_running: int, *, seed: int = 0) -> SglangSchedule:
    """The scheduler arguments of a resolved configuration running at most ``max_running``."""
    return SglangSchedule(
        max_running_requests=max_running,
        chunked_prefill_size=r.chunked_prefill_size if r.chunked_prefill_size > 0 else None,
        max_prefill_tokens=r.max_prefill_tokens,
        schedule_policy=r.schedule_policy,
        schedule_conservativeness=r.schedule_conservativeness,
        page_size=r.page_size,
        enable_mixed_chunk=r.enable_mixed_chunk,
        radix_cache=not r.disable_radix_cache,
        seed=seed,
    )


# flags
_VALUE_FLAGS: tuple[tuple[str, str, Any], ...] = (
    ("context_length", "--context-length", int),
    ("kv_cache_dtype", "--kv-cache-dtype", str),
    ("quantization", "--quantization", str),
    ("mem_fraction_static", "--mem-fraction-static", float),
    ("max_running_requests", "--max-running-requests", int),
    ("chunked_prefill_size", "--chunked-prefill-size", int),
    ("max_prefill_tokens", "--max-prefill-tokens", int),
    ("schedule_policy", "--schedule-policy", str),
    ("schedule_conservativeness", "--schedule-conservativeness", float),
    ("page_size", "--page-size", int),
    ("tp_size", "--tp-size", int),
    ("dp_size", "--dp-size", int),
    ("cuda_graph_max_bs", "--cuda-graph-max-bs", int),
)
_BOOL_FLAGS: tuple[tuple[str, str], ...] = (
    ("disable_radix_cache", "--disable-radix-cache"),
    ("enable_mixed_chunk", "--enable-mixed-chunk"),
    ("disable_overlap_schedule", "--disable-overlap-schedule"),
)
_FLAG_ALIASES = {"tp_size": ["--tensor-parallel-size"], "dp_size": ["--data-parallel-size"]}
FLAGS_HELP = (
    "SGLang flags (--engine sglang, python -m sglang.launch_server's names): "
    "--max-running-requests N, --chunked-prefill-size N (-1: off), --max-prefill-tokens N, "
    "--mem-fraction-static F, --schedule-policy lpm|fcfs|lof|random|dfs-weight, "
    "--schedule-conservativeness F, --disable-radix-cache, --enable-mixed-chunk, "
    "--cuda-graph-max-bs N, --page-size N, --tp-size N, --kv-cache-dtype auto|fp8_e4m3|fp8_e5m2, --quantization fp8, --disable-overlap-schedule, "
    "--context-length N."
)


def _parser() -> RaisingParser:
    p = RaisingParser("python -m sglang.launch_server")
    p.add_argument("--model-path", "--model", dest="model", default=None)
    p.add_argument("--gpu", default=None)
    for field, flag, typ in _VALUE_FLAGS:
        choices = SGLANG_SCHEDULE_POLICIES if field == "schedule_policy" else None
        # -1 is SGLang's "off" for the chunk size: a plain integer there.
        kind = int if field == "chunked_prefill_size" else arg_type(typ)
        names = [flag, *_FLAG_ALIASES.get(field, [])]
        p.add_argument(*names, dest=field, type=kind, choices=choices, default=None)
    for field, flag in _BOOL_FLAGS:
        p.add_argument(flag, dest=field, action="store_true", default=False)
    # Serving /metrics changes no scheduling decision: taken, and not part of the config.
    p.add_argument("--enable-metrics", dest="_metrics", action="store_true")
    return p


def parse_flags(
    argv: Sequence[str], *, model: str | None = None, gpu: str | None = None
) -> SglangConfig:
    """``python -m sglang.launch_server`` flags into a config (defaults stay unset).

    Raises:
        ConfigError: unknown flag, bad value, or missing model/GPU, worded like argparse.
    """
    try:
        ns, extra = _parser().parse_known_args(list(argv))
    except argparse.ArgumentError as e:
        raise ConfigError(str(e)) from None
    if extra:
        raise ConfigError(f"unrecognized arguments: {' '.join(extra)}")
    values = vars(ns)
    values.pop("_metrics")
    model, gpu = require_model_and_gpu(values, model, gpu, model_flag="--model-path")
    return SglangConfig(model=model, gpu=gpu, **values)


def to_argv(config: SglangConfig) -> list[str]:
    """The flags that reproduce ``config`` (only what it sets; model and GPU not included)."""
    argv: list[str] = []
    for field, flag, _ in _VALUE_FLAGS:
        value = getattr(config, field)
        if value is not None:
            argv += [flag, str(value)]
    for field, flag in _BOOL_FLAGS:
        if getattr(config, field):
            argv.append(flag)
    return argv


def launch_command(config: SglangConfig) -> list[str]:
    """``python -m sglang.launch_server --model-path HF_NAME --enable-metrics …`` for
    ``config`` (SGLang serves ``/metrics`` only with ``--enable-metrics``, and slotune's agent
    and launch backend read it)."""
    hf_name = get_model(config.model).hf_name
    return [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        hf_name,
        "--enable-metrics",
        *to_argv(config),
    ]


def check_request(r: ResolvedSglang, capacity: KvCapacity, request: SimRequest) -> None:
    """Refuse a request SGLang's pool can never hold.

    SGLang refuses a prompt of ``min(context_length, pool tokens)`` tokens or more, and
    clips ``max_tokens`` to what is left; the simulator cannot clip a request, so it refuses
    one whose prompt and reserved output (``max_tokens``, at most 4096) exceed the pool,
    which SGLang's admission would never take.

    Raises:
        RequestRejected: in SGLang's words.
    """
    limit = min(r.context_length, capacity.num_tokens) - 1
    if request.prompt_tokens >= limit:
        raise RequestRejected(
            f"The input ({request.prompt_tokens} tokens) is longer than the model's context "
            f"length ({limit} tokens)."
        )
    reserve = min(request.max_tokens, CLIP_MAX_NEW_TOKENS)
    if request.prompt_tokens + reserve >= capacity.num_tokens:
        raise RequestRejected(
            f"The request needs {request.prompt_tokens} prompt and {reserve} output tokens of KV "
            f"cache but the pool holds {capacity.num_tokens}; lower max_tokens or raise "
            "--mem-fraction-static"
        )


def kv_log_lines(capacity: KvCapacity) -> list[str]:
    """SGLang's start-up line about its KV pool (``KV Cache is allocated``)."""
    half_gb = capacity.num_tokens * capacity.kv_bytes_per_token / 2 / GIB
    return [
        f"KV Cache is allocated. #tokens: {capacity.num_tokens}, K size: {half_gb:.2f} GB, "
        f"V size: {half_gb:.2f} GB"
    ]


def search_params() -> tuple[Param, ...]:
    """The default search space over SGLang's scheduling and memory arguments."""
    return (
        choice("max_running_requests", powers_of_two(8, 4096)),
        choice("chunked_prefill_size", (-1, *powers_of_two(1024, 16384))),
        choice("max_prefill_tokens", powers_of_two(4096, 32768)),
        Param(
            "mem_fraction_static",
            ParamKind.FLOAT,
            low=0.70,
            high=0.92,
            # SGLang's own default has three decimals (0.834 on an H100): on the step grid.
            step=0.001,
            grid=(0.75, 0.83, 0.9),
        ),
        choice("schedule_policy", ("fcfs", "lpm")),
        Param(
            "schedule_conservativeness",
            ParamKind.FLOAT,
            low=0.3,
            high=1.5,
            step=0.1,
            grid=(0.3, 1.0, 1.5),
        ),
        choice("disable_radix_cache", (False, True)),
        choice("enable_mixed_chunk", (False, True)),
    )


class SglangAdapter(EngineAdapter):
    """SGLang through ``python -m sglang.launch_server`` (see the module docstring)."""

    engine = Engine.SGLANG
    label = "SGLang"
    config_type = SglangConfig
    flags_help = FLAGS_HELP
    param_aliases = PARAM_ALIASES
    length_param = "context_length"
    fixed_params = ("context_length", "tp_size")
    knob_names: ClassVar[Mapping[Knob, str]] = MappingProxyType(
        {
            Knob.MAX_RUNNING: "max_running_requests",
            Knob.TOKEN_BUDGET: "chunked_prefill_size",
            Knob.CHUNKED_PREFILL: "chunked_prefill_size",
            Knob.PREFIX_CACHE: "disable_radix_cache",
            Knob.MEMORY_FRACTION: "mem_fraction_static",
            Knob.MAX_LEN: "context_length",
            Knob.TENSOR_PARALLEL: "tp_size",
            Knob.BLOCK_SIZE: "page_size",
        }
    )
    kv_room_knobs = "raise --mem-fraction-static or lower --chunked-prefill-size"
    # The chunk size is also SGLang's chunking switch (-1: off); walking it down first found
    # the best later than the sampler's model alone (benchmarks/tuner_efficiency.py).
    walks_token_budget = False

    def knob_params(self, knob: Knob, value: Value) -> dict[str, Value]:
        # RadixAttention is turned off, and chunked prefill off by -1 and on by a size.
        if knob is Knob.PREFIX_CACHE:
            return {"disable_radix_cache": not value}
        if knob is Knob.CHUNKED_PREFILL and isinstance(value, bool):
            return {"chunked_prefill_size": DEFAULT_CHUNK_WHEN_ON if value else -1}
        return super().knob_params(knob, value)

    def config_from_params(self, model: str, gpu: str, params: Mapping[str, Any]) -> SglangConfig:
        return config_from_params(model, gpu, params)

    def resolve(self, config: EngineConfig) -> ResolvedSglang:
        return resolve(_sglang(config))

    def parse_flags(
        self, argv: Sequence[str], *, model: str | None = None, gpu: str | None = None
    ) -> SglangConfig:
        return parse_flags(argv, model=model, gpu=gpu)

    def to_argv(self, config: EngineConfig, *, options_path: str | None = None) -> list[str]:
        return to_argv(_sglang(config))

    def launch_command(self, config: EngineConfig, *, options_path: str) -> list[str]:
        return launch_command(_sglang(config))

    def default_params(self) -> tuple[Param, ...]:
        return search_params()

    def export(self, config: EngineConfig) -> str:
        return shlex.join(launch_command(_sglang(config))) + "\n"

    def kv_capacity(self, resolved: ResolvedConfig) -> KvCapacity:
        return kv_capacity(_resolved(resolved))

    def sim_view(self, resolved: ResolvedConfig, capacity: KvCapacity) -> SimView:
        r = _resolved(resolved)
        chunked = r.chunked_prefill_size > 0
        return SimView(
            max_running=max_running_requests(
                r.max_running_requests, r.context_length, capacity.num_tokens
            ),
            token_budget=r.chunked_prefill_size if chunked else r.max_prefill_tokens,
            block_size=capacity.block_size,
            chunked_prefill=chunked,
            prefix_cache=PrefixCache.NONE if r.disable_radix_cache else PrefixCache.RADIX,
            max_len=r.context_length,
            tensor_parallel_size=r.tp_size,
            kv_cache_dtype=kv_dtype_for_cost(r.kv_cache_dtype),
            memory_fraction=r.mem_fraction_static,
            enforce_eager=False,
            quantization=r.quantization,
            overlaps_host=not r.disable_overlap_schedule,
        )

    def scheduler(
        self, resolved: ResolvedConfig, view: SimView, block_manager: BlockManager
    ) -> SglangScheduler:
        return SglangScheduler(schedule_of(_resolved(resolved), view.max_running), block_manager)

    def host_step_s(self, overhead: OverheadKnobs) -> float:
        # The same host work as vLLM's; the overlap scheduler hides it (SimView.overlaps_host).
        return overhead.step_s

    def kv_log_lines(self, capacity: KvCapacity, max_len: int) -> list[str]:
        return kv_log_lines(capacity)

    def check_request(
        self, resolved: ResolvedConfig, capacity: KvCapacity, request: SimRequest
    ) -> None:
        check_request(_resolved(resolved), capacity, request)


def _sglang(config: EngineConfig) -> SglangConfig:
    if not isinstance(config, SglangConfig):
        raise ConfigError(f"expected an sglang configuration, got one for {config.engine}")
    return config


def _resolved(resolved: ResolvedConfig) -> ResolvedSglang:
    if not isinstance(resolved, ResolvedSglang):
        raise ConfigError(f"expected a resolved sglang configuration, got {resolved.engine}")
    return resolved


ADAPTER = SglangAdapter()
