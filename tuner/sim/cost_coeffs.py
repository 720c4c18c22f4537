"""Coefficients of the cost and memory models, read from the catalog's data files.

``calibration.yaml`` holds what ``python -m tuner.sim.calibration.fit`` fitted to measured
operator timings, per GPU family; ``knobs.yaml`` holds the hand-set rest (attention, per-step
overhead, memory reserves). Both carry their provenance; no coefficient lives in code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from slotune.collector.errors import ConfigError
from slotune.collector.textfile import read_text
from slotune.collector.yamlfile import read_yaml
from slotune.tuner.sim.catalog import GPU

GIB = 1024**3
ELEMENTWISE_OPS = (
    "emb",
    "input_layernorm",
    "attn_rope",
    "post_attention_layernorm",
    "mlp_act",
    "add",
)


@dataclass(frozen=True, slots=True)
class GemmCoeffs:
    """Roofline of a matrix multiply: ``latency + (compute**p + memory**p) ** (1/p)``."""

    compute_eff: float
    memory_eff: float
    smoothing_p: float
    latency_s: float


@dataclass(frozen=True, slots=True)
class ElementwiseCoeffs:
    """A memory-bound kernel over rows of one token each.

    ``latency + max(bytes / (memory_eff * bandwidth), row_bytes / (row_eff * bandwidth))``:
    with few rows the kernel runs one block per row and streams one row at a small fraction of
    the bandwidth (``row_eff``); with many rows it saturates memory (``memory_eff``).
    """

    memory_eff: float
    row_eff: float
    latency_s: float


@dataclass(frozen=True, slots=True)
class AllReduceCoeffs:
    """All-reduce over ``n`` GPUs: ``latency[n] + bytes * 2(n-1)/n / bus_bandwidth[n]``.

    ``bus_bw_eff[n]`` is the achieved bus bandwidth as a fraction of one direction of the
    GPU's interconnect bandwidth, so it transfers to GPUs with other links.
    """

    latency_s: Mapping[int, float]
    bus_bw_eff: Mapping[int, float]

    def for_workers(self, n: int) -> tuple[float, float]:
        """(latency_s, bus_bw_eff) measured for the nearest worker count."""
        nearest = min(self.latency_s, key=lambda k: (abs(k - n), k))
        return self.latency_s[nearest], self.bus_bw_eff[nearest]


@dataclass(frozen=True, slots=True)
class FamilyCoeffs:
    """Fitted coefficients for one GPU family (e.g. all Hopper parts share ``h100``)."""

    gemm: GemmCoeffs
    elementwise: Mapping[str, ElementwiseCoeffs]
    all_reduce: AllReduceCoeffs


@dataclass(frozen=True, slots=True)
class AttentionKnobs:
    prefill_compute_eff: float
    decode_memory_eff: float
    latency_s: float


@dataclass(frozen=True, slots=True)
class OverheadKnobs:
    step_s: float
    trtllm_step_s: float
    per_seq_s: float
    cuda_graph_launch_s: float
    eager_launch_per_layer_s: float
    cuda_graph_latency_scale: float
    cuda_graph_max_tokens: int


@dataclass(frozen=True, slots=True)
class CustomAllReduceKnobs:
    """The engines' own all-reduce kernel for small messages over NVLink-class links."""

    latency_s: float
    latency_per_doubling_s: float
    max_bytes: int
    min_interconnect_bytes_s: float

    def latency_for(self, num_workers: int) -> float:
        """One small all-reduce over ``num_workers`` ranks: ``latency_s`` at two, plus
        ``latency_per_doubling_s`` each time the ranks double (each rank reads every peer's
        buffer, so the kernel's fixed time grows with the group)."""
        return self.latency_s + self.latency_per_doubling_s * max(0.0, math.log2(num_workers) - 1.0)


@dataclass(frozen=True, slots=True)
class QuantizationKnobs:
    """What fp8 weights add to a linear layer besides its halved weight bytes."""

    fp8_activation_quant_latency_s: float


@dataclass(frozen=True, slots=True)
class PcieAllReduceKnobs:
    """NCCL's all-reduce between GPUs linked by PCIe only (the fitted data is NVLink's)."""

    latency_s: float
    bus_bw_eff: float


@dataclass(frozen=True, slots=True)
class MemoryKnobs:
    non_torch_bytes: int
    non_torch_per_extra_rank_bytes: int
    hidden_buffers: float
    sampler_logit_copies: float
    cuda_graph_base_bytes: int
    cuda_graph_per_layer_bytes: int


@dataclass(frozen=True, slots=True)
class Calibration:
    """Everything the cost and memory models read from data files."""

    families: Mapping[str, FamilyCoeffs]
    default_family: str
    attention: AttentionKnobs
    overhead: OverheadKnobs
    custom_all_reduce: CustomAllReduceKnobs
    quantization: QuantizationKnobs
    pcie_all_reduce: PcieAllReduceKnobs
    memory: MemoryKnobs
    source: str

    def family_for(self, gpu: GPU) -> FamilyCoeffs:
        """The fitted set for this GPU (its ``calibration_family``, else the default)."""
        return self.families.get(gpu.calibration_family) or self.families[self.default_family]


def _section(doc: Mapping[str, Any], key: str, origin: str) -> Mapping[str, Any]:
    value = doc.get(key)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{origin}: missing mapping `{key}`; regenerate or restore the file")
    return value


def _floats(doc: Mapping[str, Any], origin: str, *keys: str) -> dict[str, float]:
    out = {}
    for key in keys:
        value = doc.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ConfigError(f"{origin}: `{key}` must be a non-negative number, got {value!r}")
        out[key] = float(value)
    return out


def _parse_family(doc: Mapping[str, Any], origin: str) -> FamilyCoeffs:
    gemm = _floats(
        _section(doc, "gemm", origin),
        f"{origin}.gemm",
        "compute_eff",
        "memory_eff",
        "smoothing_p",
        "latency_s",
    )
    elementwise_doc = _section(doc, "elementwise", origin)
    elementwise = {}
    for op in ELEMENTWISE_OPS:
        values = _floats(
            _section(elementwise_doc, op, f"{origin}.elementwise"),
            f"{origin}.elementwise.{op}",
            "memory_eff",
            "row_eff",
            "latency_s",
        )
        elementwise[op] = ElementwiseCoeffs(**values)
    ar = _section(doc, "all_reduce", origin)
    latency = {int(k): float(v) for k, v in _section(ar, "latency_s", origin).items()}
    eff = {int(k): float(v) for k, v in _section(ar, "bus_bw_eff", origin).items()}
    if not latency or set(latency) != set(eff):
        raise ConfigError(
            f"{origin}.all_reduce: latency_s and bus_bw_eff need the same worker counts"
        )
    return FamilyCoeffs(GemmCoeffs(**gemm), elementwise, AllReduceCoeffs(latency, eff))


def parse_calibration(
    fitted: Mapping[str, Any], knobs: Mapping[str, Any], origin: str = "calibration"
) -> Calibration:
    """Builds a :class:`Calibration` from the two parsed YAML documents.

    Raises:
        ConfigError: a section or number is missing or malformed.
    """
    families = {
        name: _parse_family(doc, f"{origin}.families.{name}")
        for name, doc in _section(fitted, "families", origin).items()
    }
    default = str(fitted.get("default_family", ""))
    if default not in families:
        raise ConfigError(f"{origin}: default_family {default!r} is not one of {sorted(families)}")
    att = _floats(
        _section(knobs, "attention", origin),
        f"{origin}.attention",
        "prefill_compute_eff",
        "decode_memory_eff",
        "latency_s",
    )
    ovh = _floats(
        _section(knobs, "overhead", origin),
        f"{origin}.overhead",
        "step_s",
        "trtllm_step_s",
        "per_seq_s",
        "cuda_graph_launch_s",
        "eager_launch_per_layer_s",
        "cuda_graph_latency_scale",
        "cuda_graph_max_tokens",
    )
    car = _floats(
        _section(knobs, "custom_all_reduce", origin),
        f"{origin}.custom_all_reduce",
        "latency_s",
        "latency_per_doubling_s",
        "max_bytes",
        "min_interconnect_gb_s",
    )
    quant = _floats(
        _section(knobs, "quantization", origin),
        f"{origin}.quantization",
        "fp8_activation_quant_latency_s",
    )
    pcie = _floats(
        _section(knobs, "pcie_all_reduce", origin),
        f"{origin}.pcie_all_reduce",
        "latency_s",
        "bus_bw_eff",
    )
    mem = _floats(
        _section(knobs, "memory", origin),
        f"{origin}.memory",
        "non_torch_gib",
        "non_torch_per_extra_rank_gib",
        "hidden_buffers",
        "sampler_logit_copies",
        "cuda_graph_base_gib",
        "cuda_graph_per_layer_gib",
    )
    return Calibration(
        families=families,
        default_family=default,
        attention=AttentionKnobs(**att),
        overhead=OverheadKnobs(
            step_s=ovh["step_s"],
            trtllm_step_s=ovh["trtllm_step_s"],
            per_seq_s=ovh["per_seq_s"],
            cuda_graph_launch_s=ovh["cuda_graph_launch_s"],
            eager_launch_per_layer_s=ovh["eager_launch_per_layer_s"],
            cuda_graph_latency_scale=ovh["cuda_graph_latency_scale"],
            cuda_graph_max_tokens=int(ovh["cuda_graph_max_tokens"]),
        ),
        custom_all_reduce=CustomAllReduceKnobs(
            latency_s=car["latency_s"],
            latency_per_doubling_s=car["latency_per_doubling_s"],
            max_bytes=int(car["max_bytes"]),
            min_interconnect_bytes_s=car["min_interconnect_gb_s"] * 1e9,
        ),
        quantization=QuantizationKnobs(**quant),
        pcie_all_reduce=PcieAllReduceKnobs(**pcie),
        memory=MemoryKnobs(
            non_torch_bytes=int(mem["non_torch_gib"] * GIB),
            non_torch_per_extra_rank_bytes=int(mem["non_torch_per_extra_rank_gib"] * GIB),
            hidden_buffers=mem["hidden_buffers"],
            sampler_logit_copies=mem["sampler_logit_copies"],
            cuda_graph_base_bytes=int(mem["cuda_graph_base_gib"] * GIB),
            cuda_graph_per_layer_bytes=int(mem["cuda_graph_per_layer_gib"] * GIB),
        ),
        source=str(fitted.get("source", "")),
    )


def _read_yaml(path: Path | None, bundled: str) -> tuple[Mapping[str, Any], str]:
    if path is None:
        text = resources.files("slotune.tuner.sim.catalog").joinpath(bundled).read_text("utf-8")
        origin = f"bundled {bundled}"
    else:
        text = read_text(path, "calibration file", ConfigError)
        origin = str(path)
    doc = read_yaml(text, source=origin, error=ConfigError)[0]
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{origin} must be a YAML mapping")
    return doc, origin


def load_calibration(
    calibration_path: Path | None = None, knobs_path: Path | None = None
) -> Calibration:
    """Reads the fitted coefficients and the hand-set knobs (bundled files by default).

    Args:
        calibration_path: a ``calibration.yaml`` to use instead of the bundled one.
        knobs_path: a ``knobs.yaml`` to use instead of the bundled one.

    Raises:
        ConfigError: a file is missing or malformed.
    """
    if calibration_path is None and knobs_path is None:
        return _bundled_calibration()
    fitted, origin = _read_yaml(calibration_path, "calibration.yaml")
    knobs, _ = _read_yaml(knobs_path, "knobs.yaml")
    return parse_calibration(fitted, knobs, origin)


@cache
def _bundled_calibration() -> Calibration:
    fitted, origin = _read_yaml(None, "calibration.yaml")
    knobs, _ = _read_yaml(None, "knobs.yaml")
    return parse_calibration(fitted, knobs, origin)
