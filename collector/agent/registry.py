"""Which source class reads which kind of target: adding a source is one line here."""

from __future__ import annotations

from slotune.collector.agent.base import Source, SourceKind
from slotune.collector.agent.dcgm import DcgmSource
from slotune.collector.agent.federate import FederateSource
from slotune.collector.agent.nvml import NvmlSource
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
    """A fresh source for one target."""
    return SOURCES[target.kind].for_target(target)
