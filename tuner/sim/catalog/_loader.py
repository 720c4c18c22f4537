"""Reading catalog YAML files and the registry of known GPUs and models.

A catalog file holds a ``gpus:`` list, a ``models:`` list, or both (see ``gpus.yaml`` and
``models.yaml`` in this package for the fields and units). The bundled files load first, then
every file named in ``SLOTUNE_CATALOG`` (paths separated by ``:``), then files passed to
:func:`load_catalog_file`. A later entry with an id already known replaces the earlier one, so a
user file can correct a bundled number.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from slotune.collector.errors import ConfigError
from slotune.collector.textfile import read_text
from slotune.collector.yamlfile import read_yaml
from slotune.tuner.sim.catalog._types import GPU, Efficiency, ModelSpec, StepTerms

CATALOG_ENV = "SLOTUNE_CATALOG"
_GIB = 1024**3

_GPU_REQUIRED = (
    "id",
    "name",
    "bf16_tflops",
    "fp8_tflops",
    "mem_gib",
    "mem_bw_gb_s",
    "interconnect_bw_gb_s",
)
# `efficiency` holds factors fitted by `slotune sim calibrate`; `calibrated` says on what
# they were fitted and how well (read by people, not by the simulator).
_GPU_OPTIONAL = ("source", "calibration_family", "efficiency", "calibrated")
_EFFICIENCY_FIELDS = (
    "compute",
    "memory",
    "interconnect",
    "step_overhead_s",
    "all_reduce_latency_s",
    "step_terms",
)
_STEP_TERMS_FIELDS = tuple(f.name for f in dataclasses.fields(StepTerms))
_MODEL_REQUIRED = (
    "id",
    "hf_name",
    "num_layers",
    "hidden_size",
    "num_heads",
    "num_kv_heads",
    "intermediate_size",
    "vocab_size",
    "num_params",
    "max_position_embeddings",
)
_MODEL_OPTIONAL = (
    "head_dim",
    "num_experts",
    "num_active_experts",
    "moe_intermediate_size",
    "dtype_bytes",
    "source",
    "aliases",
)
_HOW_TO_ADD = (
    "add one with a YAML file (`gpus:` / `models:` lists, fields as in the bundled "
    "tuner/sim/catalog/gpus.yaml and models.yaml) passed through the environment variable "
    f"{CATALOG_ENV}=path1.yaml:path2.yaml"
)


class _Registry:
    """GPUs and models by id, plus model lookup by Hugging Face name."""

    def __init__(self) -> None:
        self.gpus: dict[str, GPU] = {}
        self.models: dict[str, ModelSpec] = {}
        self.model_names: dict[str, str] = {}
        self.env_loaded: str | None = None

    def add_gpu(self, gpu: GPU) -> None:
        self.gpus[gpu.id] = gpu

    def add_model(self, model: ModelSpec) -> None:
        self.models[model.id] = model
        for name in (model.id, model.hf_name, *model.aliases):
            self.model_names[name.lower()] = model.id


_registry: _Registry | None = None


def _get_registry() -> _Registry:
    global _registry
    if _registry is None:
        _registry = _Registry()
        for name in ("gpus.yaml", "models.yaml"):
            text = resources.files("slotune.tuner.sim.catalog").joinpath(name).read_text("utf-8")
            _load_text(_registry, text, f"bundled {name}")
    env = os.environ.get(CATALOG_ENV, "")
    if env and env != _registry.env_loaded:
        for part in env.split(":"):
            if part.strip():
                _load_text(
                    _registry,
                    _read(Path(part.strip()), f"catalog file named in {CATALOG_ENV}"),
                    part,
                )
        _registry.env_loaded = env
    return _registry


def _read(path: Path, what: str) -> str:
    return read_text(path, what, ConfigError)


def load_catalog_file(path: str | Path) -> tuple[list[str], list[str]]:
    """Adds the GPUs and models of a YAML catalog file to the catalog.

    Args:
        path: YAML file with a ``gpus:`` and/or ``models:`` list.

    Returns:
        The ids of the GPUs and of the models it added.

    Raises:
        ConfigError: the file cannot be read or an entry is malformed.
    """
    path = Path(path)
    return _load_text(_get_registry(), _read(path, "catalog file"), str(path))


def _load_text(registry: _Registry, text: str, origin: str) -> tuple[list[str], list[str]]:
    doc, _ = read_yaml(text, source=f"catalog file {origin}")
    if not isinstance(doc, Mapping) or not (set(doc) & {"gpus", "models"}):
        raise ConfigError(
            f"catalog file {origin} must be a mapping with a `gpus:` and/or `models:` list"
        )
    unknown = set(doc) - {"gpus", "models"}
    if unknown:
        raise ConfigError(
            f"catalog file {origin}: unknown top-level key(s) {sorted(unknown)}; "
            "only `gpus` and `models` are allowed"
        )
    gpus = [
        _parse_gpu(e, f"{origin} gpus[{i}]") for i, e in enumerate(_as_list(doc, "gpus", origin))
    ]
    models = [
        _parse_model(e, f"{origin} models[{i}]")
        for i, e in enumerate(_as_list(doc, "models", origin))
    ]
    for gpu in gpus:
        registry.add_gpu(gpu)
    for model in models:
        registry.add_model(model)
    return [g.id for g in gpus], [m.id for m in models]


def _as_list(doc: Mapping[str, Any], key: str, origin: str) -> list[Any]:
    value = doc.get(key) or []
    if not isinstance(value, list):
        raise ConfigError(f"catalog file {origin}: `{key}` must be a list of entries")
    return value


def _check_keys(
    entry: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...]
) -> Mapping[str, Any]:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: each entry must be a mapping of field: value")
    missing = [k for k in required if k not in entry]
    if missing:
        raise ConfigError(f"{where}: missing field(s) {missing}; required: {list(required)}")
    unknown = sorted(set(entry) - set(required) - set(optional))
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {unknown}; allowed: {list(required) + list(optional)}"
        )
    return entry


def _number(
    entry: Mapping[str, Any],
    key: str,
    where: str,
    cast: Callable[[Any], Any],
    minimum: float = 0.0,
    default: Any = None,
) -> Any:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise ConfigError(f"{where}: `{key}` must be a number >= {minimum:g}, got {value!r}")
    if cast is int and value != int(value):
        raise ConfigError(f"{where}: `{key}` must be a whole number, got {value!r}")
    return cast(value)


def _text(entry: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = entry.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: `{key}` must be a non-empty string, got {value!r}")
    return value


def _catalog_id(entry: Mapping[str, Any], where: str) -> str:
    value = _text(entry, "id", where)
    if value != value.lower() or " " in value:
        raise ConfigError(f"{where}: `id` {value!r} must be lowercase-dashed, e.g. 'h100-sxm'")
    return value


def _parse_gpu(entry: Any, where: str) -> GPU:
    e = _check_keys(entry, where, _GPU_REQUIRED, _GPU_OPTIONAL)
    where = f"{where} ({e['id']})"
    return GPU(
        id=_catalog_id(e, where),
        name=_text(e, "name", where),
        bf16_flops=_number(e, "bf16_tflops", where, float, 1e-3) * 1e12,
        fp8_flops=_number(e, "fp8_tflops", where, float, 1e-3) * 1e12,
        mem_bytes=int(_number(e, "mem_gib", where, float, 1e-3) * _GIB),
        mem_bw_bytes_s=_number(e, "mem_bw_gb_s", where, float, 1e-3) * 1e9,
        interconnect_bw_bytes_s=_number(e, "interconnect_bw_gb_s", where, float, 1e-3) * 1e9,
        source=str(e.get("source", "")),
        calibration_family=str(e.get("calibration_family", "")),
        efficiency=_parse_efficiency(e.get("efficiency", {}), f"{where} efficiency"),
    )


def _parse_efficiency(entry: Any, where: str) -> Efficiency:
    e = _check_keys(entry, where, (), _EFFICIENCY_FIELDS)
    overhead = e.get("step_overhead_s")
    return Efficiency(
        compute=_number(e, "compute", where, float, 1e-3, 1.0),
        memory=_number(e, "memory", where, float, 1e-3, 1.0),
        interconnect=_number(e, "interconnect", where, float, 1e-3, 1.0),
        step_overhead_s=None if overhead is None else _number(e, "step_overhead_s", where, float),
        all_reduce_latency_s=_number(e, "all_reduce_latency_s", where, float, 0.0, 0.0),
        step_terms=_parse_step_terms(e.get("step_terms", {}), f"{where} step_terms"),
    )


def _parse_step_terms(entry: Any, where: str) -> StepTerms:
    e = _check_keys(entry, where, (), _STEP_TERMS_FIELDS)
    # Corrections to the roofline: negative values are allowed.
    return StepTerms(**{k: _number(e, k, where, float, -math.inf, 0.0) for k in e})


def gpu_entry(gpu: GPU) -> dict[str, Any]:
    """A GPU as a catalog-file entry (the fields :func:`load_catalog_file` reads)."""
    entry: dict[str, Any] = {
        "id": gpu.id,
        "name": gpu.name,
        "bf16_tflops": gpu.bf16_flops / 1e12,
        "fp8_tflops": gpu.fp8_flops / 1e12,
        "mem_gib": round(gpu.mem_bytes / _GIB, 2),
        "mem_bw_gb_s": gpu.mem_bw_bytes_s / 1e9,
        "interconnect_bw_gb_s": gpu.interconnect_bw_bytes_s / 1e9,
    }
    if gpu.calibration_family:
        entry["calibration_family"] = gpu.calibration_family
    if gpu.source:
        entry["source"] = gpu.source
    if gpu.efficiency != Efficiency():
        eff = gpu.efficiency
        entry["efficiency"] = {
            k: v
            for k, v in (
                ("compute", eff.compute),
                ("memory", eff.memory),
                ("interconnect", eff.interconnect),
                ("step_overhead_s", eff.step_overhead_s),
                ("all_reduce_latency_s", eff.all_reduce_latency_s),
            )
            if v is not None
        }
        if eff.step_terms != StepTerms():
            entry["efficiency"]["step_terms"] = dataclasses.asdict(eff.step_terms)
    return entry


def _parse_model(entry: Any, where: str) -> ModelSpec:
    e = _check_keys(entry, where, _MODEL_REQUIRED, _MODEL_OPTIONAL)
    where = f"{where} ({e['id']})"
    hidden = _number(e, "hidden_size", where, int, 1)
    heads = _number(e, "num_heads", where, int, 1)
    kv_heads = _number(e, "num_kv_heads", where, int, 1)
    if heads % kv_heads:
        raise ConfigError(
            f"{where}: num_heads ({heads}) must be a multiple of num_kv_heads ({kv_heads})"
        )
    experts = _number(e, "num_experts", where, int, 0, 0)
    active = _number(e, "num_active_experts", where, int, 0, 0)
    moe_width = _number(e, "moe_intermediate_size", where, int, 0, 0)
    if experts and not (1 <= active <= experts and moe_width > 0):
        raise ConfigError(
            f"{where}: an MoE model (num_experts={experts}) needs 1 <= num_active_experts <= "
            f"num_experts and moe_intermediate_size > 0"
        )
    aliases = e.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise ConfigError(f"{where}: `aliases` must be a list of Hugging Face names")
    return ModelSpec(
        id=_catalog_id(e, where),
        hf_name=_text(e, "hf_name", where),
        num_layers=_number(e, "num_layers", where, int, 1),
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=_number(e, "head_dim", where, int, 1, hidden // heads),
        intermediate_size=_number(e, "intermediate_size", where, int, 1),
        vocab_size=_number(e, "vocab_size", where, int, 1),
        num_params=_number(e, "num_params", where, int, 1),
        max_position_embeddings=_number(e, "max_position_embeddings", where, int, 1),
        num_experts=experts,
        num_active_experts=active,
        moe_intermediate_size=moe_width,
        dtype_bytes=_number(e, "dtype_bytes", where, int, 1, 2),
        source=str(e.get("source", "")),
        aliases=tuple(aliases),
    )


def get_gpu(gpu_id: str) -> GPU:
    """Returns the GPU with this catalog id (case-insensitive).

    Raises:
        ConfigError: unknown id; the message lists the valid ids and how to add one.
    """
    registry = _get_registry()
    gpu = registry.gpus.get(gpu_id.strip().lower())
    if gpu is None:
        raise ConfigError(
            f"unknown GPU {gpu_id!r}; valid ids: {', '.join(sorted(registry.gpus))}; {_HOW_TO_ADD}"
        )
    return gpu


def get_model(name: str) -> ModelSpec:
    """Returns the model with this catalog id or Hugging Face name (case-insensitive).

    Raises:
        ConfigError: unknown model; the message lists the valid ids and how to add one.
    """
    registry = _get_registry()
    model_id = registry.model_names.get(name.strip().lower())
    if model_id is None:
        raise ConfigError(
            f"unknown model {name!r}; valid ids: {', '.join(sorted(registry.models))} "
            f"(Hugging Face names of these work too); {_HOW_TO_ADD}"
        )
    return registry.models[model_id]


def list_gpus() -> list[GPU]:
    """All known GPUs, sorted by id."""
    registry = _get_registry()
    return [registry.gpus[k] for k in sorted(registry.gpus)]


def list_models() -> list[ModelSpec]:
    """All known models, sorted by id."""
    registry = _get_registry()
    return [registry.models[k] for k in sorted(registry.models)]
