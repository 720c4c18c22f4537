"""Tables the pages share, as rows for ``st.dataframe`` with column configs (units, bars)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import streamlit as st

from slotune.collector.views import FleetRow, SLOStatus

LATENCY_PS = ("p50", "p90", "p99")


def pair_labels(statuses: Sequence[SLOStatus]) -> list[str]:
    """The fast/slow burn-rate conditions of every SLO's policy, in policy order."""
    labels: dict[str, None] = {}
    for s in statuses:
        labels.update(dict.fromkeys(p.label for p in s.pairs))
    return list(labels)


def rate(value: float | None) -> str:
    """A burn rate as text; a window without requests is a dash, never "None"."""
    return "–" if value is None else f"{value:.2f}×"


def _pair_cells(s: SLOStatus, labels: Sequence[str]) -> dict[str, str]:
    mine = {p.label: p for p in s.pairs}
    cells = {}
    for label in labels:
        p = mine.get(label)
        cells[f"burn {label}"] = "" if p is None else f"{rate(p.long_rate)} · {rate(p.short_rate)}"
    return cells


def slo_frame(statuses: Sequence[SLOStatus]) -> list[dict[str, Any]]:
    labels = pair_labels(statuses)
    return [
        {
            "name": s.slo.name,
            "state": s.state.value,
            "attainment": None if s.attainment is None else s.attainment * 100,
            "budget_left": None if s.budget_shown is None else s.budget_shown * 100,
            "spec": s.slo.spec,
            "objective": s.slo.objective * 100,
            **_pair_cells(s, labels),
            "firing": ", ".join(s.firing),
            "window": f"{s.slo.window_s / 86400:g}d",
            "events": s.num_events,
        }
        for s in statuses
    ]


def slo_columns(statuses: Sequence[SLOStatus]) -> dict[str, Any]:
    cc = st.column_config
    return {
        "attainment": cc.NumberColumn("attainment (SLO window)", format="%.3f %%"),
        "objective": cc.NumberColumn("objective", format="%.2f %%"),
        "budget_left": cc.ProgressColumn(
            "error budget left", format="%.1f %%", min_value=0, max_value=100
        ),
        **{
            f"burn {label}": cc.TextColumn(
                f"burn {label}", help="burn rate over the long · short window"
            )
            for label in pair_labels(statuses)
        },
        "firing": cc.TextColumn("alerts firing"),
        "events": cc.NumberColumn("requests in window", format="%d"),
    }


def fleet_frame(rows: Sequence[FleetRow], group: str) -> list[dict[str, Any]]:
    """One row per target or pool; ``group`` (pool / model / node) leads the columns."""
    gib = 1024.0**3
    out = []
    for r in rows:
        s = r.summary
        row: dict[str, Any] = {
            group: {"pool": r.pool, "model": s.model, "node": s.node}[group],
            "name": s.target,
            "engine": s.kind,
            "gpu": r.gpu or "",
            "status": "up" if s.is_up else ("down" if s.is_up is False else "unknown"),
        }
        for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
            for p in LATENCY_PS:
                row[f"{metric[:-3]}_{p}"] = getattr(s, metric).get(p)
        row.update(
            {
                "req_s": s.request_throughput,
                "out_tok_s": s.output_token_throughput,
                "in_tok_s": s.input_token_throughput,
                "running": s.requests_running,
                "waiting": s.requests_waiting,
                "kv_usage": None if s.kv_usage is None else s.kv_usage * 100,
                "prefix_hit": None if s.prefix_hit_rate is None else s.prefix_hit_rate * 100,
                "preempt_s": s.preemption_rate,
                "vram_gib": None if s.vram_used_bytes is None else s.vram_used_bytes / gib,
                "gpu_util": None if s.gpu_utilization is None else s.gpu_utilization * 100,
                "power_w": s.power_watts,
                "targets": r.num_targets,
            }
        )
        out.append(row)
    return out


LATENCY_COLUMNS = tuple(f"{m}_{p}" for m in ("ttft", "itl", "tpot", "e2e") for p in LATENCY_PS)


def latency_unit(values_ms: Iterable[float | None]) -> tuple[str, float]:
    """The unit that reads best for these milliseconds and the divisor into it: seconds once
    any reaches a second (157.5 s, not 157544.3 ms)."""
    top = max((v for v in values_ms if v is not None), default=0.0)
    return ("s", 1000.0) if top >= 1000.0 else ("ms", 1.0)


def scale_latencies(frame: list[dict[str, Any]]) -> dict[str, str]:
    """Put each latency column of ``frame`` in its own unit (in place); the units by column."""
    units = {}
    for col in LATENCY_COLUMNS:
        unit, div = latency_unit(r.get(col) for r in frame)
        units[col] = unit
        for r in frame:
            if r.get(col) is not None:
                r[col] /= div
    return units


def fleet_columns(window: str, units: Mapping[str, str]) -> dict[str, Any]:
    cc = st.column_config
    cols: dict[str, Any] = {}
    for col in LATENCY_COLUMNS:
        metric, p = col.split("_")
        unit = units.get(col, "ms")
        cols[col] = cc.NumberColumn(
            f"{metric.upper()} {p} ({unit}, {window})", format="%.2f" if unit == "s" else "%.1f"
        )
    cols.update(
        {
            "req_s": cc.NumberColumn(f"requests/s ({window})", format="%.2f"),
            "out_tok_s": cc.NumberColumn(f"output tokens/s ({window})", format="%.0f"),
            "in_tok_s": cc.NumberColumn(f"input tokens/s ({window})", format="%.0f"),
            "running": cc.NumberColumn("running (now)", format="%.0f"),
            "waiting": cc.NumberColumn("waiting (now)", format="%.0f"),
            "kv_usage": cc.ProgressColumn(
                f"KV usage (mean, {window})", format="%.0f %%", min_value=0, max_value=100
            ),
            "prefix_hit": cc.NumberColumn(f"prefix hit rate ({window})", format="%.1f %%"),
            "preempt_s": cc.NumberColumn(f"preemptions/s ({window})", format="%.3f"),
            "vram_gib": cc.NumberColumn("VRAM used (GiB, now)", format="%.1f"),
            "gpu_util": cc.ProgressColumn(
                f"GPU util (mean, {window})", format="%.0f %%", min_value=0, max_value=100
            ),
            "power_w": cc.NumberColumn(f"power (W, mean, {window})", format="%.0f"),
        }
    )
    return cols
