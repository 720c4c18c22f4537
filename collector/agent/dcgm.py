"""NVIDIA DCGM exporter (``DCGM_FI_DEV_*``, ``DCGM_FI_PROF_*``).

- Units: framebuffer fields are MiB, utilisations percent, energy mJ, clocks MHz; canonical
  series are bytes, ratios, joules and hertz.
- Labels: releases spell the host label ``Hostname`` or ``hostname``; canonical series carry
  ``hostname``, ``gpu``, ``uuid``, ``device``, ``gpu_model`` and, on MIG instances,
  ``mig_profile`` (``GPU_I_PROFILE``) and ``mig_instance`` (``GPU_I_ID``). Raw series keep the
  exporter's spelling.
- Blank values: DCGM reports a field it could not read as a sentinel (``DCGM_INT32_BLANK`` =
  0x7ffffff0, ``DCGM_INT64_BLANK`` = 0x7ffffffffffffff0, ``DCGM_FP64_BLANK`` = 2**47, each
  followed by NOT_FOUND / NOT_SUPPORTED / NOT_PERMISSIONED); such samples are dropped, they
  are not measurements.
- Types: expositions without ``# TYPE`` lines are typed from dcgm-exporter's own
  ``default-counters.csv`` (shipped in ``collector/agent/data``).
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from slotune.collector.agent.base import Family, MetricType, Sample, SourceKind, make_labels
from slotune.collector.agent.canonical import CANONICAL, Rule
from slotune.collector.agent.promsource import PromTextSource

_MIB = 1024.0 * 1024.0
DCGM_RULES: tuple[Rule, ...] = (
    Rule("DCGM_FI_DEV_FB_USED", "vram_used", _MIB),
    Rule("DCGM_FI_DEV_GPU_UTIL", "gpu_utilization", 0.01),
    Rule("DCGM_FI_DEV_MEM_COPY_UTIL", "memory_utilization", 0.01),
    Rule("DCGM_FI_DEV_POWER_USAGE", "power_watts"),
    Rule("DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_watts"),
    Rule("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_joules", 0.001),
    Rule("DCGM_FI_DEV_GPU_TEMP", "temperature_celsius"),
    Rule("DCGM_FI_DEV_MEMORY_TEMP", "memory_temperature_celsius"),
    Rule("DCGM_FI_DEV_SM_CLOCK", "sm_clock_hz", 1e6),
    Rule("DCGM_FI_DEV_MEM_CLOCK", "memory_clock_hz", 1e6),
    Rule("DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_bytes_per_second"),
    Rule("DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_bytes_per_second"),
    Rule("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "graphics_engine_active"),
    Rule("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active"),
    Rule("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active"),
)
_LABELS = {
    "Hostname": "hostname",
    "UUID": "uuid",
    "modelName": "gpu_model",
    "GPU_I_PROFILE": "mig_profile",
    "GPU_I_ID": "mig_instance",
    "DCGM_FI_DRIVER_VERSION": "driver_version",
}
_INT32_BLANK = 0x7FFFFFF0
_INT64_BLANK = float(0x7FFFFFFFFFFFFFF0)
_FP64_BLANK = 140737488355328.0
_NUM_SENTINELS = 16


def is_blank(value: float) -> bool:
    """Whether a DCGM value is one of the blank / not-found / not-supported sentinels."""
    return (
        _INT32_BLANK <= value < _INT32_BLANK + _NUM_SENTINELS
        or value >= _INT64_BLANK - _NUM_SENTINELS
        or _FP64_BLANK <= value < _FP64_BLANK + _NUM_SENTINELS
    )


def parse_counters_csv(text: str) -> dict[str, MetricType]:
    """Field types from a dcgm-exporter counters CSV (``FIELD, type, help`` per line).

    Commented (``#``) and ``label`` lines are left out; a malformed line is ignored, as
    dcgm-exporter itself would refuse to start with it.
    """
    types: dict[str, MetricType] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) < 2 or not parts[0] or parts[0].startswith("#"):
            continue
        if parts[1] in ("gauge", "counter"):
            types[parts[0]] = MetricType(parts[1])
    return types


@cache
def default_field_types() -> dict[str, MetricType]:
    """Types of the fields in dcgm-exporter's default counters file."""
    text = files("slotune.collector.agent").joinpath("data/dcgm_default_counters.csv").read_text()
    return parse_counters_csv(text)


class DcgmSource(PromTextSource):
    """The DCGM exporter's ``/metrics`` (port 9400 by default)."""

    kind = SourceKind.DCGM
    rules = DCGM_RULES

    def clean(self, family: Family) -> Family:
        kind = family.type
        if kind is MetricType.UNKNOWN:
            kind = default_field_types().get(family.name, MetricType.UNKNOWN)
        samples = tuple(s for s in family.samples if not is_blank(s.value))
        return Family(family.name, kind, samples, family.help)

    def normalise(self, family: Family) -> Family:
        samples = tuple(
            Sample(s.name, make_labels({_LABELS.get(k, k): v for k, v in s.labels}), s.value)
            for s in family.samples
        )
        return Family(family.name, family.type, samples, family.help)

    def derive(self, families: tuple[Family, ...]) -> tuple[Family, ...]:
        by_name = {f.name: f for f in families}
        parts = [
            by_name.get(n)
            for n in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")
        ]
        used, free, reserved = parts
        if used is None or free is None:
            return ()
        free_by = {s.labels: s.value for s in free.samples}
        reserved_by = {s.labels: s.value for s in reserved.samples} if reserved else {}
        samples = tuple(
            Sample(
                "vram_total",
                s.labels,
                (s.value + free_by[s.labels] + reserved_by.get(s.labels, 0.0)) * _MIB,
            )
            for s in used.samples
            if s.labels in free_by
        )
        return (
            (Family("vram_total", MetricType.GAUGE, samples, CANONICAL["vram_total"].description),)
            if samples
            else ()
        )
