"""vLLM (``vllm serve``, V1 engine): arguments, defaults, flags, space, export, simulation.

Defaults are those of ``vllm serve`` (the OpenAI API server usage context): chunked prefill
and prefix caching on, ``block_size`` 16, ``gpu_memory_utilization`` 0.9, and batch limits
that depend on the GPU: on GPUs with at least 70 GiB that are not A100s,
``max_num_batched_tokens`` 8192 and ``max_num_seqs`` 1024, elsewhere 2048 and 256. With
chunked prefill off, an unset ``max_num_batched_tokens`` becomes
``max(max_model_len, that default)`` so that a whole prompt always fits.

Flags: ``--max-num-seqs 64``, ``--max-num-seqs=64`` and ``--max_num_seqs 64`` are all
accepted (vLLM turns underscores into dashes); booleans take ``--enable-x`` /
``--no-enable-x``; the model may be given positionally as in ``vllm serve MODEL``. An
unknown flag fails with argparse's ``unrecognized arguments: ...``. ``--gpu`` (a catalog id)
is slotune's own: the GPU the simulated engine runs on.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.collector.vocabulary import Engine
from slotune.tuner.engines._args import (
    RaisingParser,
    arg_type,
    require_model_and_gpu,
    split_model,
)
from slotune.tuner.engines.base import (
    EngineAdapter,
    EngineConfig,
    Knob,
    ResolvedConfig,
    fields_from_params,
    narrow,
)
from slotune.tuner.engines.param import Param, ParamKind, Value, choice, powers_of_two
from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.catalog import GPU, QUANTIZATIONS, ModelSpec, get_gpu, get_model
from slotune.tuner.sim.cost_coeffs import OverheadKnobs
from slotune.tuner.sim.memory import (
    KvBudget,
    KvCapacity,
    gib_text,
    kv_capacity,
    validate_tensor_parallel,
)
from slotune.tuner.sim.scheduler_vllm import VllmSchedule, VllmScheduler
from slotune.tuner.sim.view import PrefixCache, SimView

VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128)
VLLM_KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
VLLM_SCHEDULING_POLICIES = ("fcfs", "priority")
_GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class VllmConfig(EngineConfig):
    """``vllm serve`` engine arguments the simulator models (None = vLLM's default)."""

    engine: ClassVar[Engine] = Engine.VLLM
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
    quantization: str | None = None
    async_scheduling: bool | None = None
    enforce_eager: bool = False
    scheduling_policy: str | None = None
    served_model_name: str | None = None


@dataclass(frozen=True, slots=True)
class ResolvedVllm(ResolvedConfig):
    """A vLLM configuration with every default filled in and validated."""

    engine: ClassVar[Engine] = Engine.VLLM
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
    quantization: str | None
    async_scheduling: bool
    enforce_eager: bool
    scheduling_policy: str
    served_model_name: str

    def to_dict(self) -> dict[str, Any]:
        """Engine parameters by vLLM's names, plus ``engine``, ``model`` and ``gpu`` ids."""
        out: dict[str, Any] = {"engine": "vllm", "model": self.model.id, "gpu": self.gpu.id}
        for f in dataclasses.fields(self):
            if f.name not in ("model", "gpu"):
                out[f.name] = getattr(self, f.name)
        return out


# configuration
def _is_large_gpu(gpu: GPU) -> bool:
    # vLLM's get_batch_defaults: larger batch defaults on >= 70 GiB devices except A100s,
    # where a large token budget was measured to lower throughput.
    return gpu.mem_bytes >= 70 * _GIB and "a100" not in gpu.id


def resolve_vllm(c: VllmConfig) -> ResolvedVllm:
    """Fill in ``vllm serve``'s defaults for this GPU and model and validate like vLLM.

    Raises:
        ConfigError: unknown GPU or model id.
        EngineConfigError: a combination vLLM refuses at start.
    """
    model = get_model(c.model)
    gpu = get_gpu(c.gpu)
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
        quantization=c.quantization,
        # On by default (vLLM's VllmConfig) unless an option it does not support is set;
        # none of those is simulated.
        async_scheduling=True if c.async_scheduling is None else c.async_scheduling,
        enforce_eager=c.enforce_eager,
        scheduling_policy=c.scheduling_policy or "fcfs",
        served_model_name=c.served_model_name or model.hf_name,
    )
    _validate(r)
    return r


def _validate(r: ResolvedVllm) -> None:
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
    if r.tensor_parallel_size < 1:
        raise EngineConfigError(
            f"tensor_parallel_size ({r.tensor_parallel_size}) must be at least 1."
        )
    validate_tensor_parallel(r.model, r.tensor_parallel_size)


# flags: (field, flag, type, help) of the value options, in `vllm serve --help` order
_VALUE_FLAGS: tuple[tuple[str, str, Any, str], ...] = (
    (
        "max_model_len",
        "--max-model-len",
        "len",
        "context length; default from the model's config (accepts 32k / 32K)",
    ),
    ("block_size", "--block-size", int, "tokens per KV block (default 16)"),
    (
        "gpu_memory_utilization",
        "--gpu-memory-utilization",
        float,
        "fraction of GPU memory for the engine (default 0.9)",
    ),
    ("kv_cache_dtype", "--kv-cache-dtype", str, "auto or fp8 (default auto)"),
    ("quantization", "--quantization", str, "weight quantization: fp8 (default: none)"),
    ("tensor_parallel_size", "--tensor-parallel-size", int, "GPUs per replica (default 1)"),
    ("max_num_batched_tokens", "--max-num-batched-tokens", int, "token budget per scheduler step"),
    ("max_num_seqs", "--max-num-seqs", int, "max running requests"),
    (
        "max_num_partial_prefills",
        "--max-num-partial-prefills",
        int,
        "concurrent partial prefills (default 1)",
    ),
    (
        "max_long_partial_prefills",
        "--max-long-partial-prefills",
        int,
        "concurrent long partial prefills (default 1)",
    ),
    (
        "long_prefill_token_threshold",
        "--long-prefill-token-threshold",
        int,
        "prompt tokens above which a prefill is long; caps a request's tokens per step",
    ),
    ("scheduling_policy", "--scheduling-policy", str, "fcfs or priority (default fcfs)"),
    ("served_model_name", "--served-model-name", str, "model name in the API"),
)
_BOOL_FLAGS = (
    ("enable_chunked_prefill", "--enable-chunked-prefill"),
    ("enable_prefix_caching", "--enable-prefix-caching"),
    ("async_scheduling", "--async-scheduling"),
)
_CHOICES: dict[str, Sequence[Any]] = {
    "block_size": VLLM_BLOCK_SIZES,
    "kv_cache_dtype": VLLM_KV_CACHE_DTYPES,
    "quantization": QUANTIZATIONS,
    "scheduling_policy": VLLM_SCHEDULING_POLICIES,
}
_SHORT_FLAGS = {"tensor_parallel_size": ("-tp",), "quantization": ("-q",)}
# 0 is vLLM's "off" for these, not an unset count.
_ZERO_MEANS_OFF = {"long_prefill_token_threshold"}

VLLM_FLAGS_HELP = (
    "vLLM flags (by vLLM's names): --max-num-seqs N, --max-num-batched-tokens N, "
    "--max-model-len N, --enable-chunked-prefill / --no-enable-chunked-prefill, "
    "--enable-prefix-caching / --no-enable-prefix-caching, --long-prefill-token-threshold N, "
    "--max-num-partial-prefills N, --max-long-partial-prefills N, --block-size N, "
    "--gpu-memory-utilization F, --tensor-parallel-size/-tp N, --kv-cache-dtype auto|fp8, --quantization fp8, --no-async-scheduling, "
    "--scheduling-policy fcfs|priority, --enforce-eager."
)


def _parser() -> RaisingParser:
    p = RaisingParser("vllm serve")
    p.add_argument("--model", default=None)
    p.add_argument("--gpu", default=None)
    for field, flag, typ, text in _VALUE_FLAGS:
        names = [flag, *_SHORT_FLAGS.get(field, ())]
        p.add_argument(
            *names,
            dest=field,
            type=arg_type(typ, zero_means_off=field in _ZERO_MEANS_OFF),
            choices=_CHOICES.get(field),
            default=None,
            help=text,
        )
    for field, flag in _BOOL_FLAGS:
        p.add_argument(flag, dest=field, action=argparse.BooleanOptionalAction, default=None)
    p.add_argument(
        "--enforce-eager",
        dest="enforce_eager",
        action=argparse.BooleanOptionalAction,
        default=False,
    )
    return p


def dashed(arg: str) -> str:
    """``--max_num_seqs=8`` -> ``--max-num-seqs=8``, as vLLM reads its flags."""
    if not arg.startswith("--"):
        return arg
    key, eq, value = arg.partition("=")
    return key.replace("_", "-") + eq + value


def parse_vllm_flags(
    argv: Sequence[str], *, model: str | None = None, gpu: str | None = None
) -> VllmConfig:
    """``vllm serve`` flags into a config (defaults stay unset until resolved).

    Raises:
        ConfigError: unknown flag, bad value, or missing model/GPU, worded like vLLM.
    """
    positional, rest = split_model(argv)
    try:
        ns, extra = _parser().parse_known_args([dashed(a) for a in rest])
    except argparse.ArgumentError as e:
        raise ConfigError(str(e)) from None
    if extra:
        raise ConfigError(f"unrecognized arguments: {' '.join(extra)}")
    values = vars(ns)
    if positional and values["model"] and positional != values["model"]:
        raise ConfigError(
            f"the model is given twice ({positional!r} and --model "
            f"{values['model']!r}); give it once"
        )
    values["model"] = values["model"] or positional
    model, gpu = require_model_and_gpu(values, model, gpu)
    return VllmConfig(model=model, gpu=gpu, **values)


def vllm_argv(config: VllmConfig) -> list[str]:
    """The ``vllm serve`` flags that set what ``config`` sets."""
    argv: list[str] = []
    for field, flag, _, _ in _VALUE_FLAGS:
        value = getattr(config, field)
        if value is not None:
            argv += [flag, str(value)]
    for field, flag in _BOOL_FLAGS:
        value = getattr(config, field)
        if value is not None:
            argv.append(flag if value else "--no-" + flag[2:])
    if config.enforce_eager:
        argv.append("--enforce-eager")
    return argv


# releases
CURRENT_VLLM_VERSION = "0.33.0"
"""The vLLM release the emulated engine and the checks below follow by default."""
# Engine flags the simulator knows that a vLLM release no longer has: flag -> the first
# release checked without it. Read from vllm/engine/arg_utils.py of the release; earlier
# releases were not checked, so the flag counts as present before the one named.
_FLAGS_REMOVED_IN: dict[str, str] = {
    "--max-num-partial-prefills": "0.33.0",
    "--max-long-partial-prefills": "0.33.0",
}


def vllm_flags_missing(argv: Sequence[str], vllm_version: str = CURRENT_VLLM_VERSION) -> list[str]:
    """The flags of ``argv`` (with their values) that this vLLM release does not accept.

    Args:
        argv: ``vllm serve`` arguments, in any spelling :func:`parse_vllm_flags` takes.
        vllm_version: the release, e.g. ``importlib.metadata.version("vllm")``.

    Raises:
        ConfigError: ``vllm_version`` is not a version number.
    """
    release = vllm_release(vllm_version)
    missing: list[str] = []
    for i, arg in enumerate(argv):
        key, eq, _ = dashed(arg).partition("=")
        removed_in = _FLAGS_REMOVED_IN.get(key)
        if removed_in is None or release < vllm_release(removed_in):
            continue
        missing.append(arg)
        if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            missing.append(argv[i + 1])
    return missing


def check_vllm_flags(argv: Sequence[str], vllm_version: str = CURRENT_VLLM_VERSION) -> None:
    """Refuse, before anything starts, what ``vllm serve`` of that release would refuse.

    For a launcher: call it with the installed release before starting a trial.

    Raises:
        EngineConfigError: a flag the release does not have, in vLLM's (argparse's) words:
            ``vllm serve: error: unrecognized arguments: --max-num-partial-prefills 2``.
    """
    missing = vllm_flags_missing(argv, vllm_version)
    if missing:
        raise EngineConfigError(
            f"vllm serve: error: unrecognized arguments: {' '.join(missing)} "
            f"(vLLM {vllm_version} has no such flag; drop it)"
        )


def vllm_release(version: str) -> tuple[int, ...]:
    """``"0.33.0"`` -> ``(0, 33, 0)``.

    Raises:
        ConfigError: not a version number.
    """
    parts = version.strip().split("+")[0].split(".")
    digits = [p for p in (("".join(c for c in part if c.isdigit())) for part in parts[:3]) if p]
    if not digits:
        raise ConfigError(f"vLLM version {version!r} is not a version number like 0.33.0")
    return tuple(int(d) for d in digits)


# the adapter
_FIELDS_BY_NAME = {
    f.name: f.name for f in dataclasses.fields(VllmConfig) if f.name not in ("model", "gpu")
}


def installed_vllm_version() -> str | None:
    """The release of the vLLM installed beside slotune, None when there is none."""
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


class VllmAdapter(EngineAdapter):
    """vLLM's V1 engine behind ``vllm serve``."""

    engine = Engine.VLLM
    label = "vLLM"
    config_type = VllmConfig
    flags_help = VLLM_FLAGS_HELP
    param_aliases: ClassVar[Mapping[str, str]] = {"tp_size": "tensor_parallel_size"}
    length_param = "max_model_len"
    fixed_params = ("max_model_len", "tensor_parallel_size")
    knob_names: ClassVar[Mapping[Knob, str]] = {
        Knob.MAX_RUNNING: "max_num_seqs",
        Knob.TOKEN_BUDGET: "max_num_batched_tokens",
        Knob.CHUNKED_PREFILL: "enable_chunked_prefill",
        Knob.PREFIX_CACHE: "enable_prefix_caching",
        Knob.MEMORY_FRACTION: "gpu_memory_utilization",
        Knob.MAX_LEN: "max_model_len",
        Knob.TENSOR_PARALLEL: "tensor_parallel_size",
        Knob.BLOCK_SIZE: "block_size",
        Knob.EAGER: "enforce_eager",
    }
    kv_room_knobs = "raise gpu_memory_utilization or lower max_num_batched_tokens"
    kv_budget = KvBudget.SHARE_OF_TOTAL

    def check_command(self, argv: Sequence[str]) -> None:
        if argv and Path(argv[0]).name == "vllm":
            version = installed_vllm_version()
            if version is not None:
                check_vllm_flags(argv[1:], version)

    def config_from_params(self, model: str, gpu: str, params: Mapping[str, Any]) -> VllmConfig:
        kwargs = fields_from_params(self.engine, params, _FIELDS_BY_NAME)
        return VllmConfig(model=model, gpu=gpu, **kwargs)

    def resolve(self, config: EngineConfig) -> ResolvedVllm:
        return resolve_vllm(narrow(config, VllmConfig))

    def parse_flags(
        self, argv: Sequence[str], *, model: str | None = None, gpu: str | None = None
    ) -> VllmConfig:
        return parse_vllm_flags(argv, model=model, gpu=gpu)

    def to_argv(self, config: EngineConfig, *, options_path: str | None = None) -> list[str]:
        return vllm_argv(narrow(config, VllmConfig))

    def launch_command(self, config: EngineConfig, *, options_path: str) -> list[str]:
        return [
            "vllm",
            "serve",
            get_model(config.model).hf_name,
            *vllm_argv(narrow(config, VllmConfig)),
        ]

    def default_params(self) -> tuple[Param, ...]:
        chunked = {"enable_chunked_prefill": True}
        return (
            choice("max_num_seqs", powers_of_two(8, 1024)),
            choice("max_num_batched_tokens", powers_of_two(512, 32768)),
            choice("enable_chunked_prefill", (True, False)),
            choice("enable_prefix_caching", (True, False)),
            Param(
                "gpu_memory_utilization",
                ParamKind.FLOAT,
                low=0.80,
                high=0.95,
                step=0.01,
                grid=(0.85, 0.9, 0.95),
            ),
            choice(
                "long_prefill_token_threshold", (0, 256, 512, 1024, 2048, 4096), requires=chunked
            ),
        )

    def repair(self, config: dict[str, Value], max_len: int) -> dict[str, Value]:
        # vLLM refuses to start with chunked prefill off and a budget below max_model_len.
        if config.get("enable_chunked_prefill") is False:
            config["max_num_batched_tokens"] = max(
                int(config.get("max_num_batched_tokens", 0)), max_len
            )
            config.pop("long_prefill_token_threshold", None)
            config.pop("max_num_partial_prefills", None)
        return config

    def invalid_reason(self, config: Mapping[str, Value]) -> str | None:
        # vLLM's SchedulerConfig check, made while parsing the arguments.
        seqs, tokens = config.get("max_num_seqs"), config.get("max_num_batched_tokens")
        if isinstance(seqs, int) and isinstance(tokens, int) and tokens < seqs:
            return (
                f"max_num_batched_tokens ({tokens}) must be greater than or equal to "
                f"max_num_seqs ({seqs})"
            )
        return None

    def export(self, config: EngineConfig) -> str:
        return shlex.join(self.launch_command(config, options_path="")) + "\n"

    def kv_capacity(self, resolved: ResolvedConfig) -> KvCapacity:
        r = narrow(resolved, ResolvedVllm)
        return kv_capacity(
            r.model,
            r.gpu,
            tensor_parallel_size=r.tensor_parallel_size,
            memory_fraction=r.gpu_memory_utilization,
            engine=Engine.VLLM,
            budget=self.kv_budget,
            block_size=r.block_size,
            kv_cache_dtype=r.kv_cache_dtype,
            quantization=r.quantization,
            max_model_len=r.max_model_len,
            max_num_seqs=r.max_num_seqs,
            max_num_batched_tokens=r.max_num_batched_tokens,
            enforce_eager=r.enforce_eager,
        )

    def sim_view(self, resolved: ResolvedConfig, capacity: KvCapacity) -> SimView:
        r = narrow(resolved, ResolvedVllm)
        return SimView(
            max_running=r.max_num_seqs,
            token_budget=r.max_num_batched_tokens,
            block_size=r.block_size,
            chunked_prefill=r.enable_chunked_prefill,
            prefix_cache=PrefixCache.BLOCK_REUSE if r.enable_prefix_caching else PrefixCache.NONE,
            max_len=r.max_model_len,
            tensor_parallel_size=r.tensor_parallel_size,
            kv_cache_dtype=r.kv_cache_dtype,
            memory_fraction=r.gpu_memory_utilization,
            enforce_eager=r.enforce_eager,
            quantization=r.quantization,
            overlaps_host=r.async_scheduling,
        )

    def scheduler(
        self, resolved: ResolvedConfig, view: SimView, block_manager: BlockManager
    ) -> VllmScheduler:
        r = narrow(resolved, ResolvedVllm)
        schedule = VllmSchedule(
            long_prefill_token_threshold=r.long_prefill_token_threshold,
            max_num_partial_prefills=r.max_num_partial_prefills,
            max_long_partial_prefills=r.max_long_partial_prefills,
            scheduling_policy=r.scheduling_policy,
        )
        return VllmScheduler(view, schedule, block_manager)

    def host_step_s(self, overhead: OverheadKnobs) -> float:
        return overhead.step_s

    def kv_log_lines(self, capacity: KvCapacity, max_len: int) -> list[str]:
        lines = []
        if capacity.cuda_graph_bytes:
            lines.append(
                f"Estimated CUDA graph memory: {gib_text(capacity.cuda_graph_bytes)} total"
            )
        lines += [
            f"Available KV cache memory: {gib_text(capacity.available_kv_bytes)}",
            f"GPU KV cache size: {capacity.num_tokens:,} tokens",
            f"Maximum concurrency for {max_len:,} tokens per request: "
            f"{capacity.num_tokens / max_len:.2f}x",
        ]
        return lines


ADAPTER = VllmAdapter()
