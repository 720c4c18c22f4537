"""Which source class reads which kind of target."""

from __future__ import annotations

from collector.agent.base import Source, SourceKind
from collector.agent.dcgm import DcgmSource
from collector.agent.nvml import FakeNvml, NvmlSource
from collector.agent.sglang import SglangSource
from collector.agent.targets import TargetSpec
from collector.agent.trtllm import TrtllmSource
from collector.agent.vllm import VllmSource

SOURCES: dict[SourceKind, type[Source]] = {
    SourceKind.VLLM: VllmSource,
    SourceKind.SGLANG: SglangSource,
    SourceKind.TRTLLM: TrtllmSource,
    SourceKind.DCGM: DcgmSource,
    SourceKind.NVML: NvmlSource,
}


def make_source(target: TargetSpec) -> Source:
    """A fresh source for one target (``nvml`` with URL ``fake`` gets the fake NVML)."""
    if target.kind is SourceKind.NVML:
        return NvmlSource(nvml=FakeNvml() if target.url == "fake" else None)
    return SOURCES[target.kind](target.metrics_urls)
