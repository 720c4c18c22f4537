"""Which source class reads which kind of target."""

from __future__ import annotations

from slotune.collector.agent.base import Source, SourceKind
from slotune.collector.agent.dcgm import DcgmSource
from slotune.collector.agent.federate import FederateSource
from slotune.collector.agent.nvml import FakeNvml, NvmlSource
from slotune.collector.agent.sglang import SglangSource
from slotune.collector.agent.targets import TargetSpec
from slotune.collector.agent.trtllm import TrtllmSource
from slotune.collector.agent.vllm import VllmSource

SOURCES: dict[SourceKind, type[Source]] = {
    SourceKind.VLLM: VllmSource,
    SourceKind.SGLANG: SglangSource,
    SourceKind.TRTLLM: TrtllmSource,
    SourceKind.DCGM: DcgmSource,
    SourceKind.NVML: NvmlSource,
    SourceKind.PROMETHEUS: FederateSource,
}


def make_source(target: TargetSpec) -> Source:
    """A fresh source for one target (``nvml`` with URL ``fake`` gets the fake NVML)."""
    if target.kind is SourceKind.NVML:
        return NvmlSource(nvml=FakeNvml() if target.url == "fake" else None)
    return SOURCES[target.kind](target.metrics_urls)
