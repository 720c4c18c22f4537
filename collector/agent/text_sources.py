"""The sources that read a Prometheus text endpoint: each engine's and DCGM's exporter.

The registry (:mod:`collector.agent.registry`) lists these with the other sources; the
federation source picks among them by metric-name prefix, so it needs this table but not the
registry that lists federation itself.
"""

from __future__ import annotations

from slotune.collector.agent.base import SourceKind
from slotune.collector.agent.dcgm import DcgmSource
from slotune.collector.agent.promsource import PromTextSource
from slotune.collector.agent.sglang import SglangSource
from slotune.collector.agent.trtllm import TrtllmSource
from slotune.collector.agent.vllm import VllmSource

TEXT_SOURCES: dict[SourceKind, type[PromTextSource]] = {
    SourceKind.VLLM: VllmSource,
    SourceKind.SGLANG: SglangSource,
    SourceKind.TRTLLM: TrtllmSource,
    SourceKind.DCGM: DcgmSource,
}
