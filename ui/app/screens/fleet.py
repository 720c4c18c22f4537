"""Fleet: targets grouped by pool / model / node; latency, load, cache and GPU figures over a
chosen range; drill down from a pool to a target."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from slotune.collector.agent import TargetMetricsSummary
from slotune.collector.store import Store
from slotune.collector.views import FleetTable, fleet_table, fleet_timeseries
from slotune.ui.app._common import (
    LIVE_S,
    RANGES,
    TTL_S,
    db_url,
    guarded,
    md,
    query_choice,
    set_query,
    store,
)
from slotune.ui.app.tables import fleet_columns, fleet_frame

GROUPS = ["pool", "model", "node"]
MAX_CHART_TARGETS = 25
ALL = "(all)"


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _table(_store: Store, url: str | None, range_s: float, end: float) -> FleetTable:
    return fleet_table(_store, end - range_s, end)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _series(
    _store: Store, url: str | None, targets: tuple[str, ...], range_s: float, end: float, steps: int
) -> list[TargetMetricsSummary]:
    return fleet_timeseries(_store, targets, end - range_s, end, steps=steps)


def _frame(points: list[TargetMetricsSummary]) -> pd.DataFrame:
    rows = []
    for p in points:
        row = {"time": pd.to_datetime(p.end_ts, unit="s", utc=True)}
        for metric in ("ttft", "itl", "tpot", "e2e"):
            for q, v in getattr(p, f"{metric}_ms").items():
                row[f"{metric} {q}"] = v
        row.update(
            {
                "requests/s": p.request_throughput,
                "output tokens/s": p.output_token_throughput,
                "input tokens/s": p.input_token_throughput,
                "running": p.requests_running,
                "waiting": p.requests_waiting,
                "KV usage %": None if p.kv_usage is None else p.kv_usage * 100,
                "prefix hit %": None if p.prefix_hit_rate is None else p.prefix_hit_rate * 100,
                "preemptions/s": p.preemption_rate,
                "VRAM GiB": None if p.vram_used_bytes is None else p.vram_used_bytes / 1024**3,
                "GPU util %": None if p.gpu_utilization is None else p.gpu_utilization * 100,
                "power W": p.power_watts,
            }
        )
        rows.append(row)
    return pd.DataFrame(rows)


CHARTS = (
    ("TTFT (ms)", ["ttft p50", "ttft p90", "ttft p99"]),
    ("ITL (ms)", ["itl p50", "itl p90", "itl p99"]),
    ("TPOT (ms)", ["tpot p50", "tpot p90", "tpot p99"]),
    ("E2E (ms)", ["e2e p50", "e2e p90", "e2e p99"]),
    ("Request rate (req/s)", ["requests/s"]),
    ("Token rates (tokens/s)", ["output tokens/s", "input tokens/s"]),
    ("Running and waiting requests", ["running", "waiting"]),
    ("KV usage and prefix hit rate (%)", ["KV usage %", "prefix hit %"]),
    ("Preemptions (/s)", ["preemptions/s"]),
    ("VRAM used (GiB)", ["VRAM GiB"]),
    ("GPU utilisation (%)", ["GPU util %"]),
    ("Power (W)", ["power W"]),
)


def _charts(df: pd.DataFrame, step_s: float) -> None:
    # Plain Vega-Lite specs: Plotly Express and Altair validate every figure against their
    # schemas (tenths of a second each), and the page draws twelve on every rerun.
    cols = st.columns(2)
    for i, (title, series) in enumerate(CHARTS):
        present = [s for s in series if s in df and df[s].notna().any()]
        with cols[i % 2]:
            if not present:
                st.caption(f"{title}: no data in this range")
                continue
            st.markdown(f"**{title}**, per {step_s:g} s step")
            long = df.melt(id_vars="time", value_vars=present, var_name="series")
            spec = {
                "mark": {"type": "line", "point": len(df) < 3},
                "height": 220,
                "encoding": {
                    "x": {"field": "time", "type": "temporal", "title": None},
                    "y": {"field": "value", "type": "quantitative", "title": title},
                    "color": {"field": "series", "type": "nominal", "title": None},
                    "tooltip": [
                        {"field": "time", "type": "temporal", "format": "%H:%M:%S"},
                        {"field": "series", "type": "nominal"},
                        {"field": "value", "type": "quantitative", "format": ".4g"},
                    ],
                },
            }
            st.vega_lite_chart(long, spec, width="stretch")


st.title("Fleet")
c1, c2, c3 = st.columns(3)
range_key = query_choice("range", list(RANGES), "1h")
group = query_choice("group", GROUPS, "pool")
range_key = c1.selectbox("Time range", list(RANGES), index=list(RANGES).index(range_key))
group = c2.selectbox("Group by", GROUPS, index=GROUPS.index(group))
set_query("range", range_key)
set_query("group", group)
range_s = RANGES[range_key]

with guarded():
    s = store()
    # Round the end so reruns within a few seconds share the cached read.
    end = float(int(time.time() // LIVE_S) * LIVE_S)
    table = _table(s, db_url(), range_s, end)

if not table.targets:
    st.info(
        "No target in the store yet: run `slotune agent --target …` on the GPU nodes (or "
        "`slotune demo`) to scrape engines into it."
    )
    st.stop()

pools = [ALL, *(r.summary.target for r in table.pools)]
pool = c3.selectbox(
    "Pool", pools, index=pools.index(query_choice("pool", pools, ALL)), key="pool_choice"
)
set_query("pool", None if pool == ALL else pool)

st.subheader(f"Pools, last {range_key}")
st.dataframe(
    fleet_frame(table.pools, "pool"),
    column_config=fleet_columns(range_key),
    hide_index=True,
    column_order=["pool", "targets", "gpu", "status", *fleet_columns(range_key)],
)
rows = [r for r in table.targets if pool == ALL or (r.pool or "(no pool)") == pool]
rows.sort(key=lambda r: (str(getattr(r.summary, group, None) or r.pool or ""), r.summary.target))
st.subheader(f"Targets by {md(group)}" + ("" if pool == ALL else f" in pool {md(pool)}"))
st.dataframe(
    fleet_frame(rows, group),
    column_config=fleet_columns(range_key),
    hide_index=True,
)

names = [r.summary.target for r in rows]
choices = ["(the whole selection)", *names]
target = query_choice("target", choices, choices[0])
target = st.selectbox("Drill down to a target", choices, index=choices.index(target))
set_query("target", None if target == choices[0] else target)
picked = tuple(names) if target == choices[0] else (target,)
if target != choices[0]:
    label = f"Target {md(target)}"
else:
    label = "All targets" if pool == ALL else f"Pool {md(pool)}"
st.subheader(f"{label}, last {range_key}")
if len(picked) > MAX_CHART_TARGETS:
    # Charts read every series of every target at each step: a whole large fleet at once
    # would take seconds per refresh; a pool or a target keeps the page live.
    st.info(
        f"{len(picked)} targets selected: pick a pool or a target above to chart them "
        f"(charts show at most {MAX_CHART_TARGETS} targets at once)."
    )
    st.stop()
steps = 60 if len(picked) == 1 else 30
with guarded():
    df = _frame(_series(s, db_url(), picked, range_s, end, steps))
_charts(df, range_s / steps)
