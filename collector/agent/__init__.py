"""The agent: scrape engines and GPUs into the store, export through OTLP and Prometheus.

See docs/agent.md. The tuner reads an engine's canonical metrics after a trial with
:func:`scrape_snapshot`.
"""

from slotune.collector.agent.base import (
    Family,
    MetricType,
    Sample,
    Scrape,
    SkippedLine,
    Source,
    SourceKind,
)
from slotune.collector.agent.canonical import CANONICAL, CanonicalMetric
from slotune.collector.agent.fetch import HttpFetcher
from slotune.collector.agent.nvml import FakeGpu, FakeNvml
from slotune.collector.agent.promtext import ParseResult, parse_text
from slotune.collector.agent.registry import make_source
from slotune.collector.agent.remote_write import parse_headers
from slotune.collector.agent.service import AgentConfig, build_agent, run_agent
from slotune.collector.agent.snapshot import EngineSnapshot, HistogramSnapshot, scrape_snapshot
from slotune.collector.agent.targets import (
    TargetSpec,
    load_targets_file,
    make_target,
    parse_target_arg,
)

__all__ = [
    "CANONICAL",
    "AgentConfig",
    "CanonicalMetric",
    "EngineSnapshot",
    "FakeGpu",
    "FakeNvml",
    "Family",
    "HistogramSnapshot",
    "HttpFetcher",
    "MetricType",
    "ParseResult",
    "Sample",
    "Scrape",
    "SkippedLine",
    "Source",
    "SourceKind",
    "TargetSpec",
    "build_agent",
    "load_targets_file",
    "make_source",
    "make_target",
    "parse_headers",
    "parse_target_arg",
    "parse_text",
    "run_agent",
    "scrape_snapshot",
]
