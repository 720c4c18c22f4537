"""``diagnose live``: what the agent stored says about each engine over a window.

For each engine target (one, a pool's, or all) the figures come from its own series and from
the GPU targets (DCGM exporter, NVML) on the same node:

- the coarse GPU split: DCGM profiling ratios (``graphics_engine_active`` = GR engine
  active, raw ``DCGM_FI_PROF_SM_ACTIVE``, ``tensor_active``, ``dram_active``, PCIe bytes/s),
  or NVML utilisation when DCGM is absent;
- the engine's split: mean queue / prefill / decode time per request (histogram sums over
  counts), tokens per step (``iteration_tokens``, from an engine that exports it: vLLM);
- KV usage, waiting and running requests (window averages), preemptions per minute, prefix
  hit rate.

JSON (``LiveDiagnosis.to_dict``, docs/diagnose.md)::

    {"kind": "live", "window_s": ..., "end_ts": ..,
     "targets": [{"target", "node", "pool", "gpu_targets", "figures", "findings"}],
     "findings": [... every target's, each with "target" in its evidence ...]}
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from slotune.collector.errors import ConfigError
from slotune.collector.metrics import MetricsReader, PromClient, metrics_reader
from slotune.collector.store import Store, TargetInfo
from slotune.collector.vocabulary import SourceKind
from slotune.tuner.diagnose._engine_rules import EngineFigures, engine_findings
from slotune.tuner.diagnose._findings import Finding, TuneContext

_GPU_KINDS = tuple(k.value for k in SourceKind if k.is_gpu)
_ENGINE_KINDS = tuple(k.value for k in SourceKind if k.is_engine)


@dataclass(frozen=True, slots=True)
class TargetDiagnosis:
    """One engine target's figures and findings."""

    target: str
    node: str | None
    pool: str | None
    gpu_targets: tuple[str, ...]
    figures: EngineFigures
    findings: tuple[Finding, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "node": self.node,
            "pool": self.pool,
            "gpu_targets": list(self.gpu_targets),
            "figures": self.figures.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass(frozen=True, slots=True)
class LiveDiagnosis:
    window_s: float
    end_ts: float
    targets: tuple[TargetDiagnosis, ...]

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for t in self.targets for f in t.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "live",
            "window_s": self.window_s,
            "end_ts": self.end_ts,
            "targets": [t.to_dict() for t in self.targets],
            "findings": [f.to_dict() for f in self.findings],
        }


def diagnose_live(
    store: Store,
    *,
    target: str | None = None,
    pool: str | None = None,
    window_s: float = 900.0,
    end_ts: float | None = None,
    context: TuneContext | None = None,
    metrics: PromClient | None = None,
) -> LiveDiagnosis:
    """Diagnose engine targets from their series over ``[end - window, end]``: the store's,
    or a query API's (``metrics``, ``--metrics``).

    Raises:
        ConfigError: unknown target or pool, no engine target, or a non-positive window.
    """
    if window_s <= 0:
        raise ConfigError(f"--window must be positive, got {window_s:g} s")
    end = time.time() if end_ts is None else end_ts
    start = end - window_s
    reader = metrics_reader(store, metrics)
    targets = reader.targets(end)
    engines = _select(targets, target, pool)
    out = []
    for eng in engines:
        gpus = [
            t for t in targets if t.kind in _GPU_KINDS and t.node is not None and t.node == eng.node
        ]
        figures = replace(
            _engine_figures(reader, eng.name, start, end),
            **_gpu_figures(reader, gpus, start, end),
        )
        findings = tuple(
            replace(f, evidence={"target": eng.name, **f.evidence})
            for f in engine_findings(figures, context)
        )
        out.append(
            TargetDiagnosis(
                eng.name, eng.node, eng.pool, tuple(g.name for g in gpus), figures, findings
            )
        )
    return LiveDiagnosis(window_s, end, tuple(out))


def _select(targets: list[TargetInfo], name: str | None, pool: str | None) -> list[TargetInfo]:
    engines = [t for t in targets if t.kind in _ENGINE_KINDS]
    if name is not None:
        chosen = [t for t in engines if t.name == name]
        if not chosen:
            known = ", ".join(t.name for t in engines) or "none"
            raise ConfigError(
                f"--target {name!r}: no engine target of that name (engine targets: {known}); "
                "see `slotune targets list`"
            )
        return chosen
    if pool is not None:
        chosen = [t for t in engines if t.pool == pool]
        if not chosen:
            pools = ", ".join(sorted({t.pool for t in engines if t.pool})) or "none"
            raise ConfigError(f"--pool {pool!r}: no engine target in that pool (pools: {pools})")
        return chosen
    if not engines:
        raise ConfigError(
            "no engine targets in the store: start `slotune agent` with an engine target "
            f"({', '.join(f'{k}=URL' for k in _ENGINE_KINDS)}) first"
        )
    return engines


def _engine_figures(reader: MetricsReader, name: str, start: float, end: float) -> EngineFigures:
    def avg(series: str) -> float | None:
        return reader.gauge_avg(name, series, start, end)

    def mean(family: str) -> float | None:
        count = reader.increase(name, f"{family}_count", start, end)
        total = reader.increase(name, f"{family}_sum", start, end)
        return total / count if count and total is not None else None

    preempted = reader.increase(name, "preemptions", start, end)
    preemptions = None if preempted is None else preempted / (end - start)
    queries = reader.increase(name, "prefix_queries", start, end)
    hits = reader.increase(name, "prefix_hits", start, end)
    return EngineFigures(
        kv_usage=avg("kv_usage"),
        requests_running=avg("requests_running"),
        requests_waiting=avg("requests_waiting"),
        preemptions_per_min=None if preemptions is None else preemptions * 60.0,
        prefix_hit_rate=hits / queries if queries and hits is not None else avg("prefix_hit_rate"),
        queue_s=mean("queue_time"),
        prefill_s=mean("prefill_time"),
        decode_s=mean("decode_time"),
        iteration_tokens=mean("iteration_tokens"),
    )


def _gpu_figures(
    reader: MetricsReader, gpus: list[TargetInfo], start: float, end: float
) -> dict[str, Any]:
    """GPU ratios averaged over the node's GPU targets: DCGM first, NVML for what it lacks."""

    def avg(series: str) -> float | None:
        values = [
            v for g in gpus if (v := reader.gauge_avg(g.name, series, start, end)) is not None
        ]
        return sum(values) / len(values) if values else None

    gr = avg("graphics_engine_active")
    util = avg("gpu_utilization")
    tx, rx = avg("pcie_tx_bytes_per_second"), avg("pcie_rx_bytes_per_second")
    return {
        "gpu_busy": gr if gr is not None else util,
        "gpu_busy_source": "dcgm_gr_engine_active"
        if gr is not None
        else ("gpu_utilization" if util is not None else None),
        "sm_active": avg("DCGM_FI_PROF_SM_ACTIVE"),
        "tensor_active": avg("tensor_active"),
        "dram_active": avg("dram_active"),
        "pcie_bytes_per_s": None if tx is None and rx is None else (tx or 0.0) + (rx or 0.0),
    }
