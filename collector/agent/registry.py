"""Which source class reads which kind of target: adding a source is one line here (an engine's
in :mod:`collector.agent.engine_sources`)."""

from __future__ import annotations

from slotune.collector.agent.base import Source, SourceKind
from slotune.collector.agent.dcgm import DcgmSource
from slotune.collector.agent.engine_sources import ENGINE_SOURCES
from slotune.collector.agent.federate import FederateSource
from slotune.collector.agent.nvml import NvmlSource
from slotune.collector.agent.targets import TargetSpec

SOURCES: dict[SourceKind, type[Source]] = {
    **ENGINE_SOURCES,
    SourceKind.DCGM: DcgmSource,
    SourceKind.NVML: NvmlSource,
    SourceKind.PROMETHEUS: FederateSource,
}


def make_source(target: TargetSpec) -> Source:
    """A fresh source for one target."""
    return SOURCES[target.kind].for_target(target)
