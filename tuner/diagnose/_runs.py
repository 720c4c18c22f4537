"""A stored ``slotune bench`` run as a request trace, for ``diagnose workload --run``.

Arrivals and lengths come from the run's own records (send times, prompt tokens, the
server's output tokens). Records carry no prompt text, so prefix blocks come from the
bundled workload the run replayed, when it names one: ``slotune bench`` sends a trace's
requests in trace order, so the i-th record is the trace's i-th request.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from slotune.collector.workload import NAMED_WORKLOADS, Trace, TraceRequest, named_workload
from slotune.tuner.diagnose._reader import TraceFileError

if TYPE_CHECKING:
    from slotune.collector.store import BenchRunData


def bench_run_trace(run: BenchRunData) -> Trace:
    """The requests of a stored run, in send order.

    Raises:
        TraceFileError: the run has no records.
    """
    records = sorted(run.records, key=lambda r: r.send_s)
    if not records:
        raise TraceFileError(f"benchmark run {run.run_id} has no request records; run it again")
    t0 = records[0].send_s
    requests = [
        TraceRequest(
            timestamp_s=r.send_s - t0,
            input_tokens=r.input_tokens,
            output_tokens=r.num_output_tokens,
        )
        for r in records
    ]
    if run.meta.workload in NAMED_WORKLOADS:
        replayed = named_workload(run.meta.workload).requests
        requests = [
            replace(r, hash_ids=w.hash_ids, block_size=w.block_size, session_id=w.session_id)
            for r, w in zip(requests, replayed, strict=False)
        ]
    return Trace(
        name=f"run {run.run_id}",
        requests=tuple(requests),
        source=f"bench run {run.run_id} ({run.meta.workload})",
    )
