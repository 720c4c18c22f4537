"""Benchmarks: runs with their config, latency distributions, rate -> latency/goodput curves
from ``--find-max-rate``, two runs side by side."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from slotune.collector.store import BenchRunInfo, Store, list_bench_runs
from slotune.collector.summary import Summary
from slotune.collector.views import LatencySamples, RateCurve, latencies_of, max_rate_curves
from slotune.ui.app._common import TTL_S, db_url, guarded, md, store, when

METRICS = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "e2e": "E2E"}


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _runs(_store: Store, url: str | None) -> list[BenchRunInfo]:
    return list_bench_runs(_store, limit=500)


@st.cache_data(ttl=300, show_spinner=False)
def _latencies(_store: Store, url: str | None, run_id: int) -> LatencySamples:
    return latencies_of(_store, run_id)


def _label(r: BenchRunInfo) -> str:
    return f"#{r.run_id} {r.meta.name} ({when(r.meta.started_at)})"


def _row(r: BenchRunInfo) -> dict[str, object]:
    s = Summary.from_dict(r.summary)
    arrival = r.meta.config.get("arrival") or {}
    return {
        "id": r.run_id,
        "name": r.meta.name,
        "started": when(r.meta.started_at),
        "model": r.meta.model,
        "workload": r.meta.workload,
        "arrival": f"{arrival.get('kind', '?')} {arrival.get('rate') or ''}".strip(),
        "requests": r.num_requests,
        "req_s": s.request_throughput,
        "goodput": s.goodput,
        "ttft_p99": s.ttft_ms.p99,
        "itl_p99": s.itl_ms.p99,
        "e2e_p99": s.e2e_ms.p99,
        "slos_met": s.all_slos_met,
    }


def _columns() -> dict[str, Any]:
    cc = st.column_config
    return {
        "req_s": cc.NumberColumn("throughput (req/s)", format="%.2f"),
        "goodput": cc.NumberColumn("goodput (req/s within every SLO)", format="%.2f"),
        "ttft_p99": cc.NumberColumn("TTFT p99 (ms)", format="%.1f"),
        "itl_p99": cc.NumberColumn("ITL p99 (ms)", format="%.1f"),
        "e2e_p99": cc.NumberColumn("E2E p99 (ms)", format="%.0f"),
        "slos_met": cc.CheckboxColumn("SLOs met"),
    }


def _distribution(samples: dict[str, LatencySamples], metric: str, cdf: bool) -> go.Figure:
    fig = go.Figure()
    for label, s in samples.items():
        values = np.sort(np.asarray(getattr(s, f"{metric}_ms")))
        if cdf:
            y = np.arange(1, values.size + 1) / max(values.size, 1) * 100
            fig.add_scatter(x=values, y=y, mode="lines", name=label)
        else:
            fig.add_histogram(x=values, name=label, opacity=0.6, nbinsx=40)
    fig.update_layout(
        barmode="overlay",
        height=300,
        margin={"t": 30},
        title=f"{METRICS[metric]} ({'CDF' if cdf else 'histogram'})",
        xaxis_title=f"{METRICS[metric]} (ms)",
        yaxis_title="% of requests at or below" if cdf else "requests",
    )
    return fig


def _curve(c: RateCurve) -> go.Figure:
    rates = [p.rate for p in c.points]
    fig = go.Figure()
    fig.add_scatter(x=rates, y=[p.goodput for p in c.points], name="goodput (req/s)")
    fig.add_scatter(x=rates, y=[p.request_throughput for p in c.points], name="throughput (req/s)")
    for attr, name in (("ttft_p99_ms", "TTFT p99 (ms)"), ("itl_p99_ms", "ITL p99 (ms)")):
        fig.add_scatter(
            x=rates, y=[getattr(p, attr) for p in c.points], name=name, yaxis="y2", line_dash="dot"
        )
    if c.max_rate is not None:
        fig.add_vline(x=c.max_rate, line_dash="dash", annotation_text=f"max {c.max_rate:g} req/s")
    fig.update_layout(
        title=c.name,
        height=340,
        margin={"t": 40},
        xaxis_title="offered rate (req/s)",
        yaxis_title="req/s",
        yaxis2={"title": "latency p99 (ms)", "overlaying": "y", "side": "right"},
    )
    return fig


st.title("Benchmarks")
with guarded():
    s = store()
    runs = _runs(s, db_url())
if not runs:
    st.info(
        "No benchmark run stored yet: `slotune bench --url … --workload azure-conv` stores one."
    )
    st.stop()

st.dataframe([_row(r) for r in runs], column_config=_columns(), hide_index=True, placeholder="–")
labels = {_label(r): r for r in runs}
ids = [str(r.run_id) for r in runs]
picked = [x for x in st.query_params.get_all("run") if x in ids][:2] or ids[:1]
chosen = st.multiselect(
    "Runs to show (two side by side)",
    list(labels),
    default=[_label(r) for r in runs if str(r.run_id) in picked],
    max_selections=2,
)
st.query_params["run"] = [str(labels[c].run_id) for c in chosen]
if chosen:
    with guarded():
        samples = {c: _latencies(s, db_url(), labels[c].run_id) for c in chosen}
    cols = st.columns(len(chosen))
    for col, c in zip(cols, chosen, strict=True):
        with col:
            r = labels[c]
            st.markdown(f"**{md(c)}**")
            st.json(dict(r.meta.config), expanded=False)
            att = r.summary.get("slo_attainment") or []
            if att:
                st.dataframe(
                    [
                        {
                            "SLO": a.get("spec"),
                            "attainment %": (a.get("attainment") or 0) * 100,
                            "met": a.get("met"),
                        }
                        for a in att
                    ],
                    hide_index=True,
                    placeholder="–",
                )
    cdf = st.toggle("Cumulative (CDF)", value=True)
    charts = st.columns(2)
    for i, metric in enumerate(METRICS):
        charts[i % 2].plotly_chart(_distribution(samples, metric, cdf), width="stretch")

curves = max_rate_curves(runs)
st.subheader("Rate → latency and goodput (max-rate searches)")
if curves:
    for curve in curves:
        st.plotly_chart(_curve(curve), width="stretch")
else:
    st.write(
        "No max-rate search stored: `slotune bench --find-max-rate --rate R --slo …` makes one."
    )
