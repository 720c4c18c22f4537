"""Which source class reads which kind of target: adding a source is one line here (an engine's
or an exporter's in :mod:`collector.agent.text_sources`)."""

from __future__ import annotations

from slotune.collector.agent.base import Source, SourceKind
from slotune.collector.agent.federate import FederateSource
from slotune.collector.agent.nvml import NvmlSource
from slotune.collector.agent.targets import TargetSpec
from slotune.collector.agent.text_sources import TEXT_SOURCES

SOURCES: dict[SourceKind, type[Source]] = {
    **TEXT_SOURCES,
    SourceKind.NVML: NvmlSource,
    SourceKind.PROMETHEUS: FederateSource,
}


def make_source(target: TargetSpec) -> Source:
    """A fresh source for one target."""
    return SOURCES[target.kind].for_target(target)
