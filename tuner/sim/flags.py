"""Engine flags by the engines' own spellings, and configs back into launch commands.

vLLM (``vllm serve``): ``--max-num-seqs 64``, ``--max-num-seqs=64`` and ``--max_num_seqs 64``
are all accepted (vLLM turns underscores into dashes); booleans take ``--enable-x`` /
``--no-enable-x``; the model may be given positionally as in ``vllm serve MODEL``. An
unknown flag fails with argparse's ``unrecognized arguments: ...``.

TensorRT-LLM (``trtllm-serve``): ``--max_batch_size``, ``--max_num_tokens``,
``--max_seq_len``, ``--tp_size``, ``--kv_cache_free_gpu_memory_fraction`` and
``--extra_llm_api_options FILE.yaml`` with the LLM API keys ``enable_chunked_prefill``,
``max_batch_size``, ``max_num_tokens``, ``max_seq_len``, ``tensor_parallel_size``,
``kv_cache_config: {free_gpu_memory_fraction, enable_block_reuse, tokens_per_block, dtype}``
and ``scheduler_config: {capacity_scheduler_policy}``. An unknown flag fails with click's
``No such option: ...``, as ``trtllm-serve`` does.

``--gpu`` (a catalog id) is slotune's own: the GPU the simulated engine runs on.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.collector.textfile import read_text
from slotune.collector.yamlfile import read_yaml
from slotune.tuner.sim.catalog import get_model
from slotune.tuner.sim.config import (
    TRTLLM_CAPACITY_POLICIES,
    TRTLLM_KV_CACHE_DTYPES,
    VLLM_BLOCK_SIZES,
    VLLM_KV_CACHE_DTYPES,
    VLLM_SCHEDULING_POLICIES,
    Engine,
    EngineConfig,
    TrtllmConfig,
    VllmConfig,
)

# (field, flag, type, help) of vLLM's integer/float/str options, in `vllm serve --help` order.
_VLLM_VALUE_FLAGS: tuple[tuple[str, str, Any, str], ...] = (
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
_VLLM_BOOL_FLAGS = (
    ("enable_chunked_prefill", "--enable-chunked-prefill"),
    ("enable_prefix_caching", "--enable-prefix-caching"),
)
_VLLM_CHOICES: dict[str, Sequence[Any]] = {
    "block_size": VLLM_BLOCK_SIZES,
    "kv_cache_dtype": VLLM_KV_CACHE_DTYPES,
    "scheduling_policy": VLLM_SCHEDULING_POLICIES,
}
_TRTLLM_FLAGS: tuple[tuple[str, str, Any], ...] = (
    ("max_batch_size", "--max_batch_size", int),
    ("max_num_tokens", "--max_num_tokens", int),
    ("max_seq_len", "--max_seq_len", int),
    ("tensor_parallel_size", "--tp_size", int),
    ("free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction", float),
)
# LLM API YAML keys -> config fields.
_TRTLLM_YAML_TOP = {
    "enable_chunked_prefill": "enable_chunked_prefill",
    "max_batch_size": "max_batch_size",
    "max_num_tokens": "max_num_tokens",
    "max_seq_len": "max_seq_len",
    "tensor_parallel_size": "tensor_parallel_size",
}
_TRTLLM_YAML_NESTED = {
    "kv_cache_config": {
        "free_gpu_memory_fraction": "free_gpu_memory_fraction",
        "enable_block_reuse": "enable_block_reuse",
        "tokens_per_block": "tokens_per_block",
        "dtype": "kv_cache_dtype",
    },
    "scheduler_config": {"capacity_scheduler_policy": "capacity_scheduler_policy"},
}

VLLM_FLAGS_HELP = (
    "vLLM flags (by vLLM's names): --max-num-seqs N, --max-num-batched-tokens N, "
    "--max-model-len N, --enable-chunked-prefill / --no-enable-chunked-prefill, "
    "--enable-prefix-caching / --no-enable-prefix-caching, --long-prefill-token-threshold N, "
    "--max-num-partial-prefills N, --max-long-partial-prefills N, --block-size N, "
    "--gpu-memory-utilization F, --tensor-parallel-size/-tp N, --kv-cache-dtype auto|fp8, "
    "--scheduling-policy fcfs|priority, --enforce-eager."
)
TRTLLM_FLAGS_HELP = (
    "TensorRT-LLM flags (--engine trtllm, trtllm-serve's names): --max_batch_size N, "
    "--max_num_tokens N, --max_seq_len N, --tp_size N, --kv_cache_free_gpu_memory_fraction F, "
    "--extra_llm_api_options FILE.yaml (enable_chunked_prefill, kv_cache_config: "
    "{free_gpu_memory_fraction, enable_block_reuse, tokens_per_block, dtype}, "
    "scheduler_config: {capacity_scheduler_policy: GUARANTEED_NO_EVICT|MAX_UTILIZATION})."
)


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def parse_engine_flags(
    argv: Sequence[str], *, engine: str = "vllm", model: str | None = None, gpu: str | None = None
) -> EngineConfig:
    """Parse engine flags into a config (defaults stay unset until :func:`resolve`).

    Args:
        argv: the flags, e.g. ``["--max-num-seqs", "64", "--no-enable-prefix-caching"]``.
        engine: ``vllm`` or ``trtllm``.
        model: catalog model id, unless ``argv`` names it (``--model`` or positionally).
        gpu: catalog GPU id, unless ``argv`` has ``--gpu``.

    Raises:
        ConfigError: unknown flag, bad value, or missing model/GPU, worded like the engine.
    """
    if engine == Engine.VLLM:
        values = _parse_vllm(argv)
    elif engine == Engine.TRTLLM:
        values = _parse_trtllm(argv)
    else:
        raise ConfigError(f"--engine {engine!r} is not simulated; use vllm or trtllm")
    model = values.pop("model", None) or model
    gpu = values.pop("gpu", None) or gpu
    if not model:
        raise ConfigError("the model is missing; pass --model ID (see slotune sim --list-models)")
    if not gpu:
        raise ConfigError("the GPU is missing; pass --gpu ID (see slotune sim --list-gpus)")
    cls: type[VllmConfig] | type[TrtllmConfig] = (
        VllmConfig if engine == Engine.VLLM else TrtllmConfig
    )
    return cls(model=model, gpu=gpu, **values)


def _human_int(text: str) -> int:
    # vLLM's human-readable lengths: k = 1000, K = 1024, m = 10**6, M = 2**20.
    scale = {"k": 1000, "K": 1024, "m": 10**6, "M": 1 << 20}
    try:
        n = int(float(text[:-1]) * scale[text[-1]]) if text and text[-1] in scale else int(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"invalid length: {text!r}") from None
    return _at_least(n, 1, text)


def _count(text: str) -> int:
    """A whole number of at least 1 (0 would silently mean the default)."""
    try:
        return _at_least(int(text), 1, text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None


def _non_negative(text: str) -> int:
    try:
        return _at_least(int(text), 0, text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None


def _at_least(n: int, low: int, text: str) -> int:
    if n < low:
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number of at least {low}")
    return n


def _finite(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return x


# Argument types of the flags' declared types: whole numbers of at least 1 (or 0 where 0 is
# the engine's "off"), finite floats.
_ZERO_MEANS_OFF = {"long_prefill_token_threshold"}


def _arg_type(field: str, typ: Any) -> Any:
    if typ == "len":
        return _human_int
    if typ is int:
        return _non_negative if field in _ZERO_MEANS_OFF else _count
    if typ is float:
        return _finite
    return typ


def _vllm_parser() -> _RaisingParser:
    p = _RaisingParser(prog="vllm serve", add_help=False, allow_abbrev=False, exit_on_error=False)
    p.add_argument("--model", default=None)
    p.add_argument("--gpu", default=None)
    for field, flag, typ, text in _VLLM_VALUE_FLAGS:
        names = [flag, "-tp"] if field == "tensor_parallel_size" else [flag]
        p.add_argument(
            *names,
            dest=field,
            type=_arg_type(field, typ),
            choices=_VLLM_CHOICES.get(field),
            default=None,
            help=text,
        )
    for field, flag in _VLLM_BOOL_FLAGS:
        p.add_argument(flag, dest=field, action=argparse.BooleanOptionalAction, default=None)
    p.add_argument(
        "--enforce-eager",
        dest="enforce_eager",
        action=argparse.BooleanOptionalAction,
        default=False,
    )
    return p


def _dashed(arg: str) -> str:
    if not arg.startswith("--"):
        return arg
    key, eq, value = arg.partition("=")
    return key.replace("_", "-") + eq + value


def _split_model(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """The model given first and positionally (``vllm serve MODEL …``), and the rest."""
    if argv and not argv[0].startswith("-"):
        return argv[0], list(argv[1:])
    return None, list(argv)


def _parse_vllm(argv: Sequence[str]) -> dict[str, Any]:
    positional, argv = _split_model(argv)
    try:
        ns, extra = _vllm_parser().parse_known_args([_dashed(a) for a in argv])
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
    return values


def _parse_trtllm(argv: Sequence[str]) -> dict[str, Any]:
    positional, argv = _split_model(argv)
    p = _RaisingParser(prog="trtllm-serve", add_help=False, allow_abbrev=False, exit_on_error=False)
    p.add_argument("--model", default=None)
    p.add_argument("--gpu", default=None)
    for field, flag, typ in _TRTLLM_FLAGS:
        p.add_argument(flag, dest=field, type=_arg_type(field, typ), default=None)
    p.add_argument("--extra_llm_api_options", default=None)
    try:
        ns, extra = p.parse_known_args(list(argv))
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
    return values


def load_extra_llm_api_options(path: str | Path) -> dict[str, Any]:
    """Read an ``--extra_llm_api_options`` YAML file into config fields.

    Raises:
        ConfigError: unreadable file, or a key the simulator does not model.
    """
    p = Path(path)
    try:
        text = read_text(p, "LLM API options file", ConfigError)
        data = read_yaml(text, source=str(p), error=ConfigError)[0] or {}
    except ConfigError as e:
        raise ConfigError(f"--extra_llm_api_options {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--extra_llm_api_options {p}: expected a mapping of LLM API options")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in _TRTLLM_YAML_TOP:
            out[_TRTLLM_YAML_TOP[key]] = value
        elif key in _TRTLLM_YAML_NESTED and isinstance(value, dict):
            for sub, sub_value in value.items():
                field = _TRTLLM_YAML_NESTED[key].get(sub)
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


def to_argv(config: EngineConfig, *, extra_options_path: str | None = None) -> list[str]:
    """The engine flags that reproduce ``config`` (model and GPU not included).

    Only parameters the config sets are written, so engine defaults stay the engine's.
    For TensorRT-LLM, options without a ``trtllm-serve`` flag go to the YAML file named by
    ``extra_options_path`` (write :func:`extra_llm_api_options` into it).

    Raises:
        ConfigError: a TensorRT-LLM config needs an options file but no path was given.
    """
    if isinstance(config, VllmConfig):
        return _vllm_argv(config)
    argv: list[str] = []
    for field, flag, _ in _TRTLLM_FLAGS:
        value = getattr(config, field)
        if value is not None:
            argv += [flag, str(value)]
    if extra_llm_api_options(config):
        if extra_options_path is None:
            raise ConfigError(
                "this TensorRT-LLM config sets LLM API options that have no "
                "trtllm-serve flag; pass extra_options_path for the YAML file"
            )
        argv += ["--extra_llm_api_options", extra_options_path]
    return argv


def _vllm_argv(config: VllmConfig) -> list[str]:
    argv: list[str] = []
    for field, flag, _, _ in _VLLM_VALUE_FLAGS:
        value = getattr(config, field)
        if value is not None:
            argv += [flag, str(value)]
    for field, flag in _VLLM_BOOL_FLAGS:
        value = getattr(config, field)
        if value is not None:
            argv.append(flag if value else "--no-" + flag[2:])
    if config.enforce_eager:
        argv.append("--enforce-eager")
    return argv


def extra_llm_api_options(config: TrtllmConfig) -> dict[str, Any]:
    """The LLM API options of a TensorRT-LLM config that ``trtllm-serve`` takes only by YAML."""
    flagged = {field for field, _, _ in _TRTLLM_FLAGS}
    out: dict[str, Any] = {}
    for key, field in _TRTLLM_YAML_TOP.items():
        value = getattr(config, field)
        if field not in flagged and value is not None:
            out[key] = value
    for section, mapping in _TRTLLM_YAML_NESTED.items():
        nested = {
            sub: getattr(config, field)
            for sub, field in mapping.items()
            if field not in flagged and getattr(config, field) is not None
        }
        if nested:
            out[section] = nested
    return out


def launch_command(
    config: EngineConfig, *, extra_options_path: str = "extra_llm_api_options.yaml"
) -> list[str]:
    """The real engine's launch command for ``config`` (``vllm serve …`` / ``trtllm-serve …``).

    The model is the catalog entry's Hugging Face name. For TensorRT-LLM, write
    :func:`extra_llm_api_options` as YAML to ``extra_options_path`` next to it.
    """
    hf_name = get_model(config.model).hf_name
    if isinstance(config, VllmConfig):
        return ["vllm", "serve", hf_name, *_vllm_argv(config)]
    return ["trtllm-serve", hf_name, *to_argv(config, extra_options_path=extra_options_path)]


# The vLLM release the emulated engine and the checks below follow by default.
CURRENT_VLLM_VERSION = "0.33.0"
# Engine flags the simulator knows that a vLLM release no longer has: flag -> the first
# release checked without it. Read from vllm/engine/arg_utils.py of the release; earlier
# releases were not checked, so the flag counts as present before the one named.
_VLLM_FLAGS_REMOVED_IN: dict[str, str] = {
    "--max-num-partial-prefills": "0.33.0",
    "--max-long-partial-prefills": "0.33.0",
}


def vllm_flags_missing(argv: Sequence[str], vllm_version: str = CURRENT_VLLM_VERSION) -> list[str]:
    """The flags of ``argv`` (with their values) that this vLLM release does not accept.

    Args:
        argv: ``vllm serve`` arguments, in any spelling :func:`parse_engine_flags` takes.
        vllm_version: the release, e.g. ``importlib.metadata.version("vllm")``.

    Raises:
        ConfigError: ``vllm_version`` is not a version number.
    """
    release = vllm_release(vllm_version)
    missing: list[str] = []
    for i, arg in enumerate(argv):
        key, eq, _ = _dashed(arg).partition("=")
        removed_in = _VLLM_FLAGS_REMOVED_IN.get(key)
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
