"""Findings from an engine's state over a window: KV-bound, queue-bound, launch-bound, idle,
healthy.

The same figures come from a live engine (the store) and from the simulator, so a measured
engine and a simulated configuration are explained in the same words.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from slotune.tuner.diagnose._findings import Finding, Severity, TuneContext, finding

KV_FULL = 0.90  # KV usage at which new requests wait for blocks
PREEMPTIONS_PER_MIN = 1.0
HEAVY_PREEMPTIONS_PER_MIN = 10.0
GPU_BUSY_LOW = 0.60  # GPU busy share below which a loaded engine is host/launch-bound
SM_OVER_GR_LOW = 0.50  # SM active over GR active: kernels too small to fill the GPU
QUEUE_SHARE = 0.30  # queue time over a request's engine time
# Mean requests running below which an engine with no queue served (almost) nothing: its
# figures say nothing about its configuration, so it is not called healthy.
IDLE_RUNNING = 0.1


@dataclass(frozen=True, slots=True)
class EngineFigures:
    """An engine's state over a window; None where the source does not report it.

    Attributes:
        gpu_busy: share of time the GPU ran work (DCGM GR engine active, else NVML
            utilisation, or the simulator's busy step time over the window).
        sm_active / tensor_active / dram_active: DCGM profiling ratios (0..1).
        pcie_bytes_per_s: PCIe transmit + receive.
        queue_s / prefill_s / decode_s: mean time per request in each phase.
        iteration_tokens: mean tokens per engine step (the batch size in tokens).
    """

    kv_usage: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    preemptions_per_min: float | None = None
    prefix_hit_rate: float | None = None
    gpu_busy: float | None = None
    gpu_busy_source: str | None = None
    sm_active: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None
    pcie_bytes_per_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    iteration_tokens: float | None = None

    @property
    def queue_share(self) -> float | None:
        parts = (self.queue_s, self.prefill_s, self.decode_s)
        if any(p is None for p in parts):
            return None
        total = sum(p for p in parts if p is not None)
        return (self.queue_s or 0.0) / total if total > 0 else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["queue_share"] = self.queue_share
        return out


def engine_findings(f: EngineFigures, context: TuneContext | None = None) -> list[Finding]:
    """What the figures say, most severe first; ``healthy`` when nothing is wrong."""
    out: list[Finding] = []
    waiting = f.requests_waiting or 0.0
    running = f.requests_running or 0.0
    kv = f.kv_usage
    preempt = f.preemptions_per_min or 0.0
    evidence = {k: v for k, v in f.to_dict().items() if v is not None}
    # Preemption happens only when the KV cache runs out, so heavy preemption with a queue is
    # KV-bound even when the window's average usage (ramp-up included) reads lower.
    kv_bound = (
        kv is not None and kv >= KV_FULL and (waiting > 0 or preempt >= PREEMPTIONS_PER_MIN)
    ) or (preempt >= HEAVY_PREEMPTIONS_PER_MIN and waiting > 0)
    if kv_bound:
        out.append(
            finding(
                "kv-bound",
                Severity.CRITICAL if preempt >= PREEMPTIONS_PER_MIN else Severity.WARNING,
                f"KV-bound: KV cache at {kv or 0:.0%} with {waiting:.1f} requests waiting and "
                f"{preempt:.1f} preemptions/min",
                evidence,
                "The KV cache is full: requests wait for blocks and running ones are preempted "
                "and recomputed. Lower max_num_seqs (fewer requests share the cache) or raise "
                "gpu_memory_utilization (a bigger cache); expect fewer preemptions and a lower "
                "TTFT tail at the same throughput, or add replicas.",
                ("max_num_seqs", "gpu_memory_utilization", "max_num_batched_tokens"),
                context,
            )
        )
    queue = f.queue_share
    if not kv_bound and queue is not None and queue >= QUEUE_SHARE and waiting > 0:
        out.append(
            finding(
                "queue-bound",
                Severity.WARNING,
                f"requests spend {queue:.0%} of their engine time queued while the KV cache "
                f"has room ({kv:.0%} used)"
                if kv is not None
                else f"requests spend {queue:.0%} of their engine time queued",
                evidence,
                "The scheduler admits too few requests per step for the offered load: raise "
                "max_num_seqs and max_num_batched_tokens, or add replicas.",
                ("max_num_seqs", "max_num_batched_tokens"),
                context,
            )
        )
    busy = f.gpu_busy
    small_kernels = (
        f.sm_active is not None
        and busy is not None
        and busy > 0
        and f.sm_active / busy < SM_OVER_GR_LOW
    )
    if running >= 1 and busy is not None and (busy < GPU_BUSY_LOW or small_kernels):
        out.append(
            finding(
                "launch-bound",
                Severity.WARNING,
                f"the engine has {running:.1f} requests running but the GPU is busy only "
                f"{busy:.0%} of the time"
                + (f" and its SMs {f.sm_active:.0%}" if f.sm_active is not None else ""),
                evidence,
                "Steps are too small and fragmented for the GPU: the host's scheduling and "
                "kernel launches dominate. Capture CUDA graphs (do not run with "
                "enforce_eager), overlap scheduling with execution (async_scheduling), and "
                "batch more per step (max_num_seqs, max_num_batched_tokens).",
                ("enforce_eager", "async_scheduling", "max_num_seqs", "max_num_batched_tokens"),
                context,
            )
        )
    if not out and f.requests_running is not None and running < IDLE_RUNNING and waiting <= 0:
        out.append(
            finding(
                "idle",
                Severity.INFO,
                f"idle: {running:.2f} requests running and none waiting on average"
                + (f", GPU busy {busy:.0%}" if busy is not None else ""),
                evidence,
                "The engine served (almost) no traffic in the window, so nothing can be judged: "
                "diagnose it while it serves its load, or drive it with slotune bench first.",
            )
        )
    if not out:
        out.append(
            finding(
                "healthy",
                Severity.OK,
                "healthy: "
                + ", ".join(
                    part
                    for part in (
                        f"GPU busy {busy:.0%}" if busy is not None else "",
                        f"KV {kv:.0%}" if kv is not None else "",
                        f"{waiting:.1f} waiting",
                        f"prefix hits {f.prefix_hit_rate:.0%}"
                        if f.prefix_hit_rate is not None
                        else "",
                    )
                    if part
                ),
                evidence,
                "Nothing to change for efficiency; tune against your SLOs if they are missed.",
            )
        )
    return out
