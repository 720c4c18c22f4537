"""TensorRT-LLM (``trtllm-serve``): options, defaults, flags, space, export, simulation.

Defaults are those of ``trtllm-serve``: ``max_batch_size`` 2048, ``max_num_tokens`` 8192,
chunked prefill off, ``kv_cache_config.free_gpu_memory_fraction`` 0.9,
``enable_block_reuse`` on, ``tokens_per_block`` 32, capacity scheduler policy
``GUARANTEED_NO_EVICT``.

Flags: ``--max_batch_size``, ``--max_num_tokens``, ``--max_seq_len``, ``--tp_size``,
``--kv_cache_free_gpu_memory_fraction`` and ``--extra_llm_api_options FILE.yaml`` with the
LLM API keys ``enable_chunked_prefill``, ``max_batch_size``, ``max_num_tokens``,
``max_seq_len``, ``tensor_parallel_size``, ``kv_cache_config: {free_gpu_memory_fraction,
enable_block_reuse, tokens_per_block, dtype}`` and ``scheduler_config:
{capacity_scheduler_policy}``. An unknown flag fails with click's ``No such option: ...``,
as ``trtllm-serve`` does. Parameters go by their LLM API names, dotted for nested options
(``kv_cache_config.enable_block_reuse``).
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.collector.textfile import read_text
from slotune.collector.vocabulary import Engine
from slotune.collector.yamlfile import read_yaml
from slotune.tuner.engines._args import RaisingParser, arg_type, require_model_and_gpu, split_model
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
from slotune.tuner.sim.request import RequestRejected, SimRequest
from slotune.tuner.sim.scheduler_trtllm import TrtllmScheduler
from slotune.tuner.sim.view import PrefixCache, SimView

TRTLLM_CAPACITY_POLICIES = ("GUARANTEED_NO_EVICT", "MAX_UTILIZATION")
TRTLLM_KV_CACHE_DTYPES = ("auto", "fp8")
TRTLLM_OPTIONS_FILE = "extra_llm_api_options.yaml"


@dataclass(frozen=True, slots=True)
class TrtllmConfig(EngineConfig):
    """``trtllm-serve`` options and LLM API options the simulator models (None = default)."""

    engine: ClassVar[Engine] = Engine.TRTLLM
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
    quantization: str | None = None


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
    "quantization": "quantization",
}
"""Config field -> its LLM API name (dotted for nested options)."""


@dataclass(frozen=True, slots=True)
class ResolvedTrtllm(ResolvedConfig):
    """A TensorRT-LLM configuration with every default filled in and validated."""

    engine: ClassVar[Engine] = Engine.TRTLLM
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
    quantization: str | None

    def to_dict(self) -> dict[str, Any]:
        """Engine parameters by TensorRT-LLM's (dotted LLM API) names."""
        out: dict[str, Any] = {"engine": "trtllm", "model": self.model.id, "gpu": self.gpu.id}
        for f in dataclasses.fields(self):
            if f.name not in ("model", "gpu"):
                out[TRTLLM_PARAM_NAMES[f.name]] = getattr(self, f.name)
        return out


# configuration
def resolve_trtllm(c: TrtllmConfig) -> ResolvedTrtllm:
    """Fill in ``trtllm-serve``'s defaults and validate like TensorRT-LLM.

    Raises:
        ConfigError: unknown GPU or model id.
        EngineConfigError: a combination TensorRT-LLM refuses at start.
    """
    model = get_model(c.model)
    gpu = get_gpu(c.gpu)
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
        quantization=c.quantization,
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
    if r.tensor_parallel_size < 1:
        raise EngineConfigError(
            f"tensor_parallel_size ({r.tensor_parallel_size}) must be at least 1."
        )
    validate_tensor_parallel(model, r.tensor_parallel_size)
    return r


# flags
_FLAGS: tuple[tuple[str, str, Any], ...] = (
    ("max_batch_size", "--max_batch_size", int),
    ("max_num_tokens", "--max_num_tokens", int),
    ("max_seq_len", "--max_seq_len", int),
    ("tensor_parallel_size", "--tp_size", int),
    ("free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction", float),
)
# LLM API YAML keys -> config fields.
_YAML_TOP = {
    "enable_chunked_prefill": "enable_chunked_prefill",
    "max_batch_size": "max_batch_size",
    "max_num_tokens": "max_num_tokens",
    "max_seq_len": "max_seq_len",
    "tensor_parallel_size": "tensor_parallel_size",
}
_YAML_NESTED = {
    "kv_cache_config": {
        "free_gpu_memory_fraction": "free_gpu_memory_fraction",
        "enable_block_reuse": "enable_block_reuse",
        "tokens_per_block": "tokens_per_block",
        "dtype": "kv_cache_dtype",
    },
    "scheduler_config": {"capacity_scheduler_policy": "capacity_scheduler_policy"},
}

TRTLLM_FLAGS_HELP = (
    "TensorRT-LLM flags (--engine trtllm, trtllm-serve's names): --max_batch_size N, "
    "--max_num_tokens N, --max_seq_len N, --tp_size N, --kv_cache_free_gpu_memory_fraction F, "
    "--extra_llm_api_options FILE.yaml (enable_chunked_prefill, kv_cache_config: "
    "{free_gpu_memory_fraction, enable_block_reuse, tokens_per_block, dtype}, "
    "scheduler_config: {capacity_scheduler_policy: GUARANTEED_NO_EVICT|MAX_UTILIZATION})."
)


def parse_trtllm_flags(
    argv: Sequence[str], *, model: str | None = None, gpu: str | None = None
) -> TrtllmConfig:
    """``trtllm-serve`` flags (and their options file) into a config (defaults unset).

    Raises:
        ConfigError: unknown flag, bad value, unreadable options file, missing model/GPU.
    """
    positional, rest = split_model(argv)
    p = RaisingParser("trtllm-serve")
    p.add_argument("--model", default=None)
    p.add_argument("--gpu", default=None)
    for field, flag, typ in _FLAGS:
        p.add_argument(flag, dest=field, type=arg_type(typ), default=None)
    p.add_argument("--extra_llm_api_options", default=None)
    # Not a trtllm-serve flag: TensorRT-LLM reads the weights' precision from the checkpoint,
    # so --quantization fp8 stands for serving an FP8 checkpoint of the model.
    p.add_argument("--quantization", choices=QUANTIZATIONS, default=None)
    try:
        ns, extra = p.parse_known_args(rest)
    except argparse.ArgumentError as e:
        raise ConfigError(f"Invalid value for {e.argument_name}: {e.message}") from None
    if extra:
        raise ConfigError(f"No such option: {extra[0]}")
    values = vars(ns)
    values["model"] = values["model"] or positional
    path = values.pop("extra_llm_api_options")
    if path:
        for key, value in load_extra_llm_api_options(path).items():
            if values.get(key) is None:
                values[key] = value
    model, gpu = require_model_and_gpu(values, model, gpu)
    return TrtllmConfig(model=model, gpu=gpu, **values)


def load_extra_llm_api_options(path: str | Path) -> dict[str, Any]:
    """Read an ``--extra_llm_api_options`` YAML file into config fields.

    Raises:
        ConfigError: unreadable file, or a key the simulator does not model.
    """
    p = Path(path)
    try:
        text = read_text(p, "LLM API options file", ConfigError)
        data = read_yaml(text, source=str(p), error=ConfigError)[0]
    except ConfigError as e:
        raise ConfigError(f"--extra_llm_api_options {e}") from None
    # An empty file too: trtllm-serve reads it as None and fails at start.
    if not isinstance(data, dict):
        raise ConfigError(f"--extra_llm_api_options {p}: expected a mapping of LLM API options")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in _YAML_TOP:
            out[_YAML_TOP[key]] = value
        elif key in _YAML_NESTED and isinstance(value, dict):
            for sub, sub_value in value.items():
                field = _YAML_NESTED[key].get(sub)
                if field is None:
                    raise ConfigError(
                        f"--extra_llm_api_options {p}: {key}.{sub}: Extra inputs "
                        "are not permitted (not modelled by the simulator)"
                    )
                out[field] = sub_value
        else:
            raise ConfigError(
                f"--extra_llm_api_options {p}: {key}: Extra inputs are not "
                "permitted (not modelled by the simulator)"
            )
    policy = out.get("capacity_scheduler_policy")
    if policy is not None and policy not in TRTLLM_CAPACITY_POLICIES:
        raise ConfigError(
            f"--extra_llm_api_options {p}: scheduler_config."
            f"capacity_scheduler_policy: Input should be "
            f"{' or '.join(repr(x) for x in TRTLLM_CAPACITY_POLICIES)}"
        )
    dtype = out.get("kv_cache_dtype")
    if dtype is not None and dtype not in TRTLLM_KV_CACHE_DTYPES:
        raise ConfigError(
            f"--extra_llm_api_options {p}: kv_cache_config.dtype: Input should be 'auto' or 'fp8'"
        )
    return out


def trtllm_argv(config: TrtllmConfig, *, options_path: str | None = None) -> list[str]:
    """The ``trtllm-serve`` flags that set what ``config`` sets.

    Options without a flag go to the YAML file named by ``options_path`` (write
    :func:`extra_llm_api_options` into it).

    Raises:
        ConfigError: the config needs an options file but no path was given.
    """
    argv: list[str] = []
    for field, flag, _ in _FLAGS:
        value = getattr(config, field)
        if value is not None:
            argv += [flag, str(value)]
    if extra_llm_api_options(config):
        if options_path is None:
            raise ConfigError(
                "this TensorRT-LLM config sets LLM API options that have no "
                "trtllm-serve flag; pass extra_options_path for the YAML file"
            )
        argv += ["--extra_llm_api_options", options_path]
    return argv


def extra_llm_api_options(config: TrtllmConfig) -> dict[str, Any]:
    """The LLM API options of a TensorRT-LLM config that ``trtllm-serve`` takes only by YAML."""
    flagged = {field for field, _, _ in _FLAGS}
    out: dict[str, Any] = {}
    for key, field in _YAML_TOP.items():
        value = getattr(config, field)
        if field not in flagged and value is not None:
            out[key] = value
    for section, mapping in _YAML_NESTED.items():
        nested = {
            sub: getattr(config, field)
            for sub, field in mapping.items()
            if field not in flagged and getattr(config, field) is not None
        }
        if nested:
            out[section] = nested
    return out


# the adapter
_FIELDS_BY_NAME = {v: k for k, v in TRTLLM_PARAM_NAMES.items()}


class TrtllmAdapter(EngineAdapter):
    """TensorRT-LLM's PyTorch backend behind ``trtllm-serve``."""

    engine = Engine.TRTLLM
    label = "TensorRT-LLM"
    config_type = TrtllmConfig
    flags_help = TRTLLM_FLAGS_HELP
    param_aliases: ClassVar[Mapping[str, str]] = {"tp_size": "tensor_parallel_size"}
    length_param = "max_seq_len"
    fixed_params = ("max_seq_len", "tensor_parallel_size")
    knob_names: ClassVar[Mapping[Knob, str]] = {
        Knob.MAX_RUNNING: "max_batch_size",
        Knob.TOKEN_BUDGET: "max_num_tokens",
        Knob.CHUNKED_PREFILL: "enable_chunked_prefill",
        Knob.PREFIX_CACHE: "kv_cache_config.enable_block_reuse",
        Knob.MEMORY_FRACTION: "kv_cache_config.free_gpu_memory_fraction",
        Knob.MAX_LEN: "max_seq_len",
        Knob.TENSOR_PARALLEL: "tensor_parallel_size",
        Knob.BLOCK_SIZE: "kv_cache_config.tokens_per_block",
    }
    kv_room_knobs = "raise kv_cache_config.free_gpu_memory_fraction or lower max_num_tokens"
    kv_budget = KvBudget.SHARE_OF_FREE
    export_language = "yaml"

    def config_from_params(self, model: str, gpu: str, params: Mapping[str, Any]) -> TrtllmConfig:
        kwargs = fields_from_params(self.engine, params, _FIELDS_BY_NAME)
        return TrtllmConfig(model=model, gpu=gpu, **kwargs)

    def resolve(self, config: EngineConfig) -> ResolvedTrtllm:
        return resolve_trtllm(narrow(config, TrtllmConfig))

    def parse_flags(
        self, argv: Sequence[str], *, model: str | None = None, gpu: str | None = None
    ) -> TrtllmConfig:
        return parse_trtllm_flags(argv, model=model, gpu=gpu)

    def to_argv(self, config: EngineConfig, *, options_path: str | None = None) -> list[str]:
        return trtllm_argv(narrow(config, TrtllmConfig), options_path=options_path)

    def launch_command(self, config: EngineConfig, *, options_path: str) -> list[str]:
        hf_name = get_model(config.model).hf_name
        return ["trtllm-serve", hf_name, *self.to_argv(config, options_path=options_path)]

    def launch_files(self, config: EngineConfig) -> dict[str, Any]:
        return extra_llm_api_options(narrow(config, TrtllmConfig))

    def default_params(self) -> tuple[Param, ...]:
        return (
            choice("max_batch_size", powers_of_two(8, 2048)),
            choice("max_num_tokens", powers_of_two(512, 32768)),
            choice("enable_chunked_prefill", (True, False)),
            choice("kv_cache_config.enable_block_reuse", (True, False)),
            Param(
                "kv_cache_config.free_gpu_memory_fraction",
                ParamKind.FLOAT,
                low=0.80,
                high=0.95,
                step=0.01,
                grid=(0.85, 0.9, 0.95),
            ),
            choice("scheduler_config.capacity_scheduler_policy", TRTLLM_CAPACITY_POLICIES),
        )

    def repair(self, config: dict[str, Value], max_len: int) -> dict[str, Value]:
        # Without chunked prefill a prompt longer than max_num_tokens is refused.
        if config.get("enable_chunked_prefill") is False:
            config["max_num_tokens"] = max(int(config.get("max_num_tokens", 0)), max_len)
        return config

    def export(self, config: EngineConfig) -> str:
        command = shlex.join(self.launch_command(config, options_path=TRTLLM_OPTIONS_FILE))
        options = yaml.safe_dump(self.launch_files(config), sort_keys=False)
        checkpoint = narrow(config, TrtllmConfig).quantization
        note = (
            f"# serve a {checkpoint} checkpoint of the model in place of the name below\n"
            if checkpoint
            else ""
        )
        return (
            f"# {TRTLLM_OPTIONS_FILE}\n{options}---\n"
            f"# launch (with {TRTLLM_OPTIONS_FILE} in the working directory):\n{note}# {command}\n"
        )

    def kv_capacity(self, resolved: ResolvedConfig) -> KvCapacity:
        r = narrow(resolved, ResolvedTrtllm)
        return kv_capacity(
            r.model,
            r.gpu,
            tensor_parallel_size=r.tensor_parallel_size,
            memory_fraction=r.free_gpu_memory_fraction,
            engine=Engine.TRTLLM,
            budget=self.kv_budget,
            block_size=r.tokens_per_block,
            kv_cache_dtype=r.kv_cache_dtype,
            quantization=r.quantization,
            max_model_len=r.max_seq_len,
            max_num_seqs=r.max_batch_size,
            max_num_batched_tokens=r.max_num_tokens,
            enforce_eager=False,
        )

    def sim_view(self, resolved: ResolvedConfig, capacity: KvCapacity) -> SimView:
        r = narrow(resolved, ResolvedTrtllm)
        return SimView(
            max_running=r.max_batch_size,
            token_budget=r.max_num_tokens,
            block_size=r.tokens_per_block,
            chunked_prefill=r.enable_chunked_prefill,
            prefix_cache=PrefixCache.BLOCK_REUSE if r.enable_block_reuse else PrefixCache.NONE,
            max_len=r.max_seq_len,
            tensor_parallel_size=r.tensor_parallel_size,
            kv_cache_dtype=r.kv_cache_dtype,
            memory_fraction=r.free_gpu_memory_fraction,
            enforce_eager=False,
            quantization=r.quantization,
        )

    def scheduler(
        self, resolved: ResolvedConfig, view: SimView, block_manager: BlockManager
    ) -> TrtllmScheduler:
        policy = narrow(resolved, ResolvedTrtllm).capacity_scheduler_policy
        return TrtllmScheduler(view, policy, block_manager)

    def host_step_s(self, overhead: OverheadKnobs) -> float:
        return overhead.trtllm_step_s

    def kv_log_lines(self, capacity: KvCapacity, max_len: int) -> list[str]:
        allocated = capacity.num_tokens * capacity.kv_bytes_per_token
        return [
            f"[TensorRT-LLM][INFO] Number of tokens per block: {capacity.block_size}.",
            f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {gib_text(allocated)} "
            f"for max tokens in paged KV cache ({capacity.num_tokens}).",
        ]

    def check_request(
        self, resolved: ResolvedConfig, capacity: KvCapacity, request: SimRequest
    ) -> None:
        r = narrow(resolved, ResolvedTrtllm)
        if not r.enable_chunked_prefill and request.prompt_tokens > r.max_num_tokens:
            raise RequestRejected(
                f"The prompt length ({request.prompt_tokens}) exceeds max_num_tokens "
                f"({r.max_num_tokens}) and chunked prefill is disabled; enable "
                "enable_chunked_prefill or raise max_num_tokens"
            )
        total = request.prompt_tokens + request.max_tokens
        if -(-total // capacity.block_size) > capacity.num_blocks:
            raise RequestRejected(
                f"The request needs {total} tokens of KV cache but the engine holds only "
                f"{capacity.num_blocks * capacity.block_size}"
            )


ADAPTER = TrtllmAdapter()
