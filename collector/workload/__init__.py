"""Workloads: real and synthetic request traces in one canonical form."""

from slotune.collector.workload.traces import (
    NAMED_WORKLOADS,
    Trace,
    TraceRequest,
    load_trace,
    named_workload,
    resolve_workload,
    retime,
)

__all__ = [
    "NAMED_WORKLOADS",
    "Trace",
    "TraceRequest",
    "load_trace",
    "named_workload",
    "resolve_workload",
    "retime",
]
