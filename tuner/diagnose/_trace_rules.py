"""Findings from a trace's time split and launch statistics.

Transfer and communication thresholds are shares of GPU busy time (what the GPU does when it
does something); idle thresholds are shares of total time (all ranks and devices added). They
follow the method the product is built on: compute-dominant is healthy; transfer-dominant
means data moves between host and GPU too often; launch-dominant means work is too small
and fragmented; exposed communication means collectives are not hidden behind compute.
"""

from __future__ import annotations

from typing import Any

from slotune.tuner.diagnose._findings import Finding, Severity, TuneContext, finding
from slotune.tuner.diagnose._launch import LaunchStats
from slotune.tuner.diagnose._split import TimeSplit

TRANSFER_SHARE = 0.15  # exposed memcpy over busy time
COMM_SHARE = 0.15  # exposed communication over busy time
HOST_IDLE_SHARE = 0.15  # idle while the CPU launches or syncs, over total time
SHORT_KERNEL_SHARE = 0.30  # busy time in kernels < 10 µs
IDLE_SHARE = 0.50  # idle with no host cause
HEALTHY_COMPUTE_SHARE = 0.70  # compute over busy time
WARMUP_SHARE = 0.5  # one launch call holding this much of the host idle time is warm-up


def trace_findings(
    overall: TimeSplit, launch: LaunchStats | None, context: TuneContext | None = None
) -> list[Finding]:
    """What the split and the launch figures say, most severe first.

    ``launch`` is None for a split without launch records (the simulator's): the launch rule
    then rests on the host-idle time alone.
    """
    out: list[Finding] = []
    share = overall.share
    compute_of_busy = overall.compute_ms / overall.busy_ms if overall.busy_ms > 0 else 0.0
    of_busy = (lambda ms: ms / overall.busy_ms) if overall.busy_ms > 0 else (lambda ms: 0.0)
    transfer = of_busy(overall.exposed_memcpy_ms)
    if transfer >= TRANSFER_SHARE:
        worst = max(overall.memcpy.items(), key=lambda kv: kv[1].exposed_ms, default=None)
        out.append(
            finding(
                "transfer-bound",
                Severity.CRITICAL if transfer >= 2 * TRANSFER_SHARE else Severity.WARNING,
                f"exposed memory transfers take {transfer:.0%} of GPU busy time"
                + (f", mostly {worst[0]}" if worst else ""),
                {
                    "exposed_memcpy_ms": overall.exposed_memcpy_ms,
                    "exposed_memcpy_busy_share": transfer,
                    "busy_ms": overall.busy_ms,
                    **{f"exposed_{d}_ms": t.exposed_ms for d, t in overall.memcpy.items()},
                },
                "Data moves between host and GPU too often with nothing to hide it: batch more "
                "work per transfer (larger batches), keep tensors on the GPU, use pinned memory "
                "and non-blocking copies so transfers overlap compute, fix the input pipeline.",
                ("max_num_seqs", "max_num_batched_tokens"),
                context,
            )
        )
    host_idle_ms = overall.host_idle_ms
    if launch is not None and launch.longest_launch_ms >= WARMUP_SHARE * host_idle_ms > 0:
        # One call holds most of the host idle: a first launch loading its module, not a
        # steady launch overhead. Say so, and judge the rest without it.
        out.append(
            finding(
                "warm-up-in-trace",
                Severity.INFO,
                f"one launch call takes {launch.longest_launch_ms:,.1f} ms: the trace includes "
                "warm-up (module loading, first-call initialisation)",
                {"longest_launch_ms": launch.longest_launch_ms, "host_idle_ms": host_idle_ms},
                "Start the profiler schedule after a few warm-up steps (torch.profiler "
                "schedule(wait=1, warmup=2, active=3)) so the figures show the steady state.",
            )
        )
        host_idle_ms = max(host_idle_ms - launch.longest_launch_ms, 0.0)
    host_idle = share(host_idle_ms)
    short = launch.short_kernel_busy_share if launch is not None else 0.0
    if host_idle >= HOST_IDLE_SHARE or short >= SHORT_KERNEL_SHARE:
        graphs = launch.num_graph_launches if launch is not None else None
        evidence: dict[str, Any] = {"host_idle_ms": host_idle_ms, "host_idle_share": host_idle}
        if launch is not None:
            evidence |= {
                "short_kernel_busy_share": short,
                "num_short_kernels": launch.num_short_kernels,
                "num_kernels": launch.num_kernels,
                "launch_cpu_ms": launch.launch_cpu_ms,
                "launch_delay_p50_us": launch.launch_delay.p50_us,
                "num_graph_launches": graphs,
                "num_kernel_launches": launch.num_kernel_launches,
            }
        out.append(
            finding(
                "launch-bound",
                Severity.CRITICAL if host_idle >= 2 * HOST_IDLE_SHARE else Severity.WARNING,
                f"the GPU waits on the host: {host_idle:.0%} of GPU time idle while the CPU "
                "launches, syncs or schedules"
                + (f", {short:.0%} of busy time in kernels < 10 µs" if launch else ""),
                evidence,
                "Work is too small and fragmented for the launch cost: capture CUDA graphs "
                "(do not run with enforce_eager), batch more requests per step, and overlap "
                "scheduling with execution (async_scheduling)."
                + (" No graph launches were recorded." if graphs == 0 else ""),
                ("enforce_eager", "async_scheduling", "max_num_seqs", "max_num_batched_tokens"),
                context,
            )
        )
    comm = of_busy(overall.exposed_comm_ms)
    if comm >= COMM_SHARE:
        out.append(
            finding(
                "communication-bound",
                Severity.WARNING,
                f"exposed communication (NCCL/RCCL) takes {comm:.0%} of GPU busy time",
                {
                    "exposed_comm_ms": overall.exposed_comm_ms,
                    "overlapped_comm_ms": overall.overlapped_comm_ms,
                    "exposed_comm_busy_share": comm,
                },
                "Collectives are not hidden behind compute: use fewer tensor-parallel ranks "
                "per replica (more replicas instead), or faster interconnect (NVLink).",
                ("tensor_parallel_size",),
                context,
            )
        )
    idle = share(overall.idle_ms)
    if idle >= IDLE_SHARE and host_idle < HOST_IDLE_SHARE:
        out.append(
            finding(
                "gpu-underused",
                Severity.WARNING,
                f"the GPU is idle {idle:.0%} of the trace with no launch or sync call to blame",
                {"idle_ms": overall.idle_ms, "idle_share": idle, "total_ms": overall.total_ms},
                "The GPU has nothing to do most of the time: the offered load is too low for "
                "this GPU, or the host is busy elsewhere (tokenisation, data loading, Python). "
                "Raise the load per replica or consolidate replicas.",
                ("max_num_seqs",),
                context,
            )
        )
    if all(f.severity is Severity.INFO for f in out) and compute_of_busy >= HEALTHY_COMPUTE_SHARE:
        out.append(
            finding(
                "compute-bound",
                Severity.OK,
                f"compute-dominant: {compute_of_busy:.0%} of busy time is compute, {idle:.0%} idle",
                {"compute_ms": overall.compute_ms, "compute_busy_share": compute_of_busy},
                "Healthy: the GPU spends its time computing. Gains now come from the "
                "batching and memory settings against your SLOs, not from overheads.",
            )
        )
    return out
