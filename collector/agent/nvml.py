"""NVML through ``nvidia-ml-py`` (the maintained package that provides the ``pynvml`` module).

Per GPU: memory (``nvmlDeviceGetMemoryInfo`` version 2, which separates reserved memory),
utilisation, PCIe throughput, power, energy, temperature, SM and memory clocks, and the memory
of each compute process. A field the GPU does not support (NVML_ERROR_NOT_SUPPORTED) is left
out; the other fields still count. Without a driver (no ``libnvidia-ml.so``, no GPU) the
source raises ``SourceError("NVML unavailable: ...")``; the agent logs that once, reports the
target down and carries on with the others.

:class:`FakeNvml` implements the same calls for tests and GPU-less demos
(``--scrape nvml=fake``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from slotune.collector.agent.base import (
    Family,
    Fetcher,
    Labels,
    MetricType,
    Sample,
    Scrape,
    Source,
    SourceKind,
)
from slotune.collector.agent.canonical import CANONICAL
from slotune.collector.agent.targets import TargetSpec
from slotune.collector.errors import SourceError

_RAW = "nvml:"
# raw NVML reading -> (canonical name, factor from the raw unit)
_CANONICAL: dict[str, tuple[str, float]] = {
    "memory_used_bytes": ("vram_used", 1.0),
    "memory_total_bytes": ("vram_total", 1.0),
    "utilization_gpu_percent": ("gpu_utilization", 0.01),
    "utilization_memory_percent": ("memory_utilization", 0.01),
    "pcie_tx_kilobytes_per_second": ("pcie_tx_bytes_per_second", 1000.0),
    "pcie_rx_kilobytes_per_second": ("pcie_rx_bytes_per_second", 1000.0),
    "power_milliwatts": ("power_watts", 0.001),
    "power_limit_milliwatts": ("power_limit_watts", 0.001),
    "energy_millijoules": ("energy_joules", 0.001),
    "temperature_celsius": ("temperature_celsius", 1.0),
    "clock_sm_mhz": ("sm_clock_hz", 1e6),
    "clock_memory_mhz": ("memory_clock_hz", 1e6),
    "process_used_memory_bytes": ("process_vram_used", 1.0),
}
_COUNTERS = {"energy_millijoules"}


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlSource(Source):
    """GPUs of the local machine through NVML.

    Args:
        urls: unused (NVML is a library, not an endpoint).
        nvml: the NVML module to call; None imports ``pynvml`` on first use. Tests pass
            a :class:`FakeNvml`.
    """

    kind = SourceKind.NVML

    def __init__(self, urls: Iterable[str] = (), nvml: Any | None = None) -> None:
        super().__init__(urls)
        self._nvml = nvml
        self._initialised = False

    @classmethod
    def for_target(cls, target: TargetSpec) -> NvmlSource:
        """The local NVML; the URL ``fake`` gets the built-in :class:`FakeNvml`."""
        return cls(nvml=FakeNvml() if target.url == "fake" else None)

    async def collect(self, fetch: Fetcher) -> Scrape:
        return await asyncio.to_thread(self.collect_now)

    def collect_now(self) -> Scrape:
        """Read every GPU once (blocking; ``collect`` runs it in a worker thread)."""
        nv = self._api()
        readings: list[tuple[str, Labels, float]] = []
        try:
            for index in range(int(nv.nvmlDeviceGetCount())):
                handle = nv.nvmlDeviceGetHandleByIndex(index)
                labels = (
                    ("gpu", str(index)),
                    ("gpu_model", _text(nv.nvmlDeviceGetName(handle))),
                    ("uuid", _text(nv.nvmlDeviceGetUUID(handle))),
                )
                readings.extend((name, labels, v) for name, v in _device(nv, handle))
                readings.extend(_processes(nv, handle, labels))
        except nv.NVMLError as e:
            raise SourceError(f"NVML failed while reading the GPUs: {e}") from None
        return _scrape(readings)

    def _api(self) -> Any:
        if self._nvml is None:
            import pynvml  # deferred: importing is cheap, but keep NVML out of other paths

            self._nvml = pynvml
        if not self._initialised:
            try:
                self._nvml.nvmlInit()
            except (self._nvml.NVMLError, OSError) as e:
                raise SourceError(
                    f"NVML unavailable: {e}; on a GPU node install the NVIDIA driver "
                    "(libnvidia-ml.so), elsewhere drop the nvml target"
                ) from None
            self._initialised = True
        return self._nvml

    def close(self) -> None:
        if self._initialised and self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._initialised = False


def _device(nv: Any, handle: Any) -> Iterable[tuple[str, float]]:
    def read(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except nv.NVMLError:
            return None  # not supported on this GPU: leave the field out

    mem = read(lambda: nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2))
    if mem is not None:
        yield "memory_used_bytes", float(mem.used)
        yield "memory_total_bytes", float(mem.total)
        yield "memory_reserved_bytes", float(mem.reserved)
        yield "memory_free_bytes", float(mem.free)
    util = read(lambda: nv.nvmlDeviceGetUtilizationRates(handle))
    if util is not None:
        yield "utilization_gpu_percent", float(util.gpu)
        yield "utilization_memory_percent", float(util.memory)
    scalars: tuple[tuple[str, Callable[[], Any]], ...] = (
        (
            "pcie_tx_kilobytes_per_second",
            lambda: nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_TX_BYTES),
        ),
        (
            "pcie_rx_kilobytes_per_second",
            lambda: nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_RX_BYTES),
        ),
        ("power_milliwatts", lambda: nv.nvmlDeviceGetPowerUsage(handle)),
        ("power_limit_milliwatts", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(handle)),
        ("energy_millijoules", lambda: nv.nvmlDeviceGetTotalEnergyConsumption(handle)),
        (
            "temperature_celsius",
            lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU),
        ),
        ("clock_sm_mhz", lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM)),
        ("clock_memory_mhz", lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM)),
    )
    for name, fn in scalars:
        value = read(fn)
        if value is not None:
            yield name, float(value)


def _processes(nv: Any, handle: Any, labels: Labels) -> Iterable[tuple[str, Labels, float]]:
    try:
        procs = nv.nvmlDeviceGetComputeRunningProcesses(handle)
    except nv.NVMLError:
        return
    for p in procs:
        used = getattr(p, "usedGpuMemory", None)
        if used is not None:  # None when the driver hides it (e.g. inside some containers)
            yield "process_used_memory_bytes", (*labels, ("pid", str(p.pid))), float(used)


def _scrape(readings: list[tuple[str, Labels, float]]) -> Scrape:
    raw: dict[str, list[Sample]] = {}
    canonical: dict[str, list[Sample]] = {}
    for name, labels, value in readings:
        labels = tuple(sorted(labels))
        raw.setdefault(name, []).append(Sample(_RAW + name, labels, value))
        if name in _CANONICAL:
            target, scale = _CANONICAL[name]
            canonical.setdefault(target, []).append(Sample(target, labels, value * scale))
    return Scrape(
        tuple(
            Family(_RAW + n, MetricType.COUNTER if n in _COUNTERS else MetricType.GAUGE, tuple(s))
            for n, s in raw.items()
        ),
        tuple(
            Family(n, CANONICAL[n].type, tuple(s), CANONICAL[n].description)
            for n, s in canonical.items()
        ),
    )


class FakeNvmlError(Exception):
    """The fake's NVMLError (the real one is ``pynvml.NVMLError``)."""


@dataclass
class FakeGpu:
    """One fake GPU's readings (defaults: an H100 SXM under load)."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-5fd4d3c3-0000-4000-8000-000000000000"
    total_bytes: int = 85_520_809_984
    used_bytes: int = 76_000_000_000
    reserved_bytes: int = 520_093_696
    utilization_gpu: int = 87
    utilization_memory: int = 54
    power_mw: int = 512_000
    power_limit_mw: int = 700_000
    energy_mj: int = 1_000_000
    temperature_c: int = 61
    sm_clock_mhz: int = 1980
    memory_clock_mhz: int = 2619
    pcie_tx_kbs: int = 1_200
    pcie_rx_kbs: int = 3_400
    processes: tuple[tuple[int, int], ...] = ((4242, 75_000_000_000),)
    supports_pcie: bool = True


class FakeNvml:
    """The subset of ``pynvml`` the NVML source calls, answering from :class:`FakeGpu` data.

    Energy grows by ``power_mw`` × 1 s per read, like a GPU read once a second.

    Args:
        gpus: the GPUs to report; default one H100.
        available: False behaves like a machine without a driver (``nvmlInit`` fails).
    """

    NVMLError = FakeNvmlError
    nvmlMemory_v2 = 0x02000028
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(self, gpus: Iterable[FakeGpu] | None = None, *, available: bool = True) -> None:
        self.gpus = list(gpus) if gpus is not None else [FakeGpu()]
        self.available = available
        self.num_init_calls = 0

    def nvmlInit(self) -> None:
        self.num_init_calls += 1
        if not self.available:
            raise FakeNvmlError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        """Nothing to release."""

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> str:
        return gpu.name

    def nvmlDeviceGetUUID(self, gpu: FakeGpu) -> str:
        return gpu.uuid

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu, version: int | None = None) -> SimpleNamespace:
        if version != self.nvmlMemory_v2:
            raise FakeNvmlError("the fake answers memory info version 2 only")
        free = gpu.total_bytes - gpu.used_bytes - gpu.reserved_bytes
        return SimpleNamespace(
            total=gpu.total_bytes, used=gpu.used_bytes, reserved=gpu.reserved_bytes, free=free
        )

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(gpu=gpu.utilization_gpu, memory=gpu.utilization_memory)

    def nvmlDeviceGetPcieThroughput(self, gpu: FakeGpu, counter: int) -> int:
        if not gpu.supports_pcie:
            raise FakeNvmlError("Not Supported")
        return gpu.pcie_tx_kbs if counter == self.NVML_PCIE_UTIL_TX_BYTES else gpu.pcie_rx_kbs

    def nvmlDeviceGetPowerUsage(self, gpu: FakeGpu) -> int:
        return gpu.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, gpu: FakeGpu) -> int:
        return gpu.power_limit_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, gpu: FakeGpu) -> int:
        gpu.energy_mj += gpu.power_mw
        return gpu.energy_mj

    def nvmlDeviceGetTemperature(self, gpu: FakeGpu, sensor: int) -> int:
        return gpu.temperature_c

    def nvmlDeviceGetClockInfo(self, gpu: FakeGpu, clock: int) -> int:
        return gpu.sm_clock_mhz if clock == self.NVML_CLOCK_SM else gpu.memory_clock_mhz

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: FakeGpu) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in gpu.processes]
