"""Workloads: real and synthetic request traces in one canonical form."""

from slotune.collector.workload.traces import (
    MOONCAKE_BLOCK_SIZE,
    NAMED_WORKLOADS,
    Trace,
    TraceRequest,
    load_trace,
    named_workload,
    resolve_workload,
    retime,
)

__all__ = [
    "MOONCAKE_BLOCK_SIZE",
    "NAMED_WORKLOADS",
    "Trace",
    "TraceRequest",
    "load_trace",
    "named_workload",
    "resolve_workload",
    "retime",
]
