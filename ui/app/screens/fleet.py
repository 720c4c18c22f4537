"""Fleet: targets grouped by pool / model / node; latency, load, cache and GPU figures over a
chosen range; drill down from a pool to a target."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from slotune.collector.metrics import TargetMetricsSummary
from slotune.collector.store import Store
from slotune.collector.views import FleetTable, fleet_table, fleet_timeseries_by_target, outlier
from slotune.ui.app._common import (
    LIVE_S,
    RANGES,
    TTL_S,
    db_url,
    guarded,
    md,
    metrics,
    query_choice,
    set_query,
    store,
)
from slotune.ui.app.tables import (
    LATENCY_PS,
    fleet_columns,
    fleet_frame,
    latency_unit,
    scale_latencies,
)

GROUPS = ["pool", "model", "node"]
MAX_CHART_TARGETS = 25
ALL = "(all)"


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _table(_store: Store, url: str | None, range_s: float, end: float) -> FleetTable:
    return fleet_table(_store, end - range_s, end, metrics=metrics())


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _series(
    _store: Store, url: str | None, targets: tuple[str, ...], range_s: float, end: float, steps: int
) -> dict[str, list[TargetMetricsSummary]]:
    return fleet_timeseries_by_target(
        _store, targets, end - range_s, end, steps=steps, metrics=metrics()
    )


Reading = Callable[[TargetMetricsSummary], "float | None"]


def _pct(v: float | None) -> float | None:
    return None if v is None else v * 100


def _latency(metric: str, q: str) -> Reading:
    return lambda p: getattr(p, f"{metric}_ms").get(q)


# title, unit (None: a latency in ms, scaled to its best unit), and the series of one target
CHARTS: tuple[tuple[str, str | None, tuple[tuple[str, Reading], ...]], ...] = (
    *(
        (m.upper(), None, tuple((q, _latency(m, q)) for q in LATENCY_PS))
        for m in ("ttft", "itl", "tpot", "e2e")
    ),
    ("Request rate", "req/s", (("requests/s", lambda p: p.request_throughput),)),
    (
        "Token rates",
        "tokens/s",
        (
            ("output", lambda p: p.output_token_throughput),
            ("input", lambda p: p.input_token_throughput),
        ),
    ),
    (
        "Running and waiting requests",
        "requests",
        (("running", lambda p: p.requests_running), ("waiting", lambda p: p.requests_waiting)),
    ),
    (
        "KV usage and prefix hit rate",
        "%",
        (
            ("KV usage", lambda p: _pct(p.kv_usage)),
            ("prefix hit", lambda p: _pct(p.prefix_hit_rate)),
        ),
    ),
    ("Preemptions", "/s", (("preemptions/s", lambda p: p.preemption_rate),)),
    (
        "VRAM used",
        "GiB",
        (("VRAM", lambda p: None if p.vram_used_bytes is None else p.vram_used_bytes / 1024**3),),
    ),
    ("GPU utilisation", "%", (("GPU util", lambda p: _pct(p.gpu_utilization)),)),
    ("Power", "W", (("power", lambda p: p.power_watts),)),
)
PER_TARGET_P = "p99"  # the percentile each target draws when several are charted


def _per_target(readings: tuple[tuple[str, Reading], ...]) -> tuple[tuple[str, Reading], ...]:
    """The one reading each target draws when several are charted."""
    return tuple(r for r in readings if r[0] == PER_TARGET_P) or readings[:1]


def _long(
    series: dict[str, list[TargetMetricsSummary]], readings: tuple[tuple[str, Reading], ...]
) -> pd.DataFrame:
    """One row per time, target and reading: several targets chart one reading each (the
    first, or the latency percentile :data:`PER_TARGET_P`), one target charts all of them."""
    if len(series) > 1:
        readings = _per_target(readings)
    rows = [
        {"time": p.end_ts * 1000.0, "series": t if len(series) > 1 else name, "value": read(p)}
        for t, points in series.items()
        for p in points
        for name, read in readings
    ]
    return pd.DataFrame(rows, columns=["time", "series", "value"])


def _charts(series: dict[str, list[TargetMetricsSummary]], range_s: float, steps: int) -> None:
    # Plain Vega-Lite specs: Plotly Express and Altair validate every figure against their
    # schemas (tenths of a second each), and the page draws twelve on every rerun.
    cols = st.columns(2)
    many = len(series) > 1
    step_s = range_s / steps
    clock = "%H:%M" if range_s <= 86400 else "%d %b %H:%M"
    for i, (title, unit, readings) in enumerate(CHARTS):
        df = _long(series, readings).dropna(subset=["value"])
        if many and len(readings) > 1:
            title = f"{title}: {_per_target(readings)[0][0]} per target"
        with cols[i % 2]:
            if df.empty:
                st.caption(f"{title}: no data in this range")
                continue
            if unit is None:
                unit, div = latency_unit(df["value"])
                df["value"] = df["value"] / div
            odd = outlier({t: list(g["value"]) for t, g in df.groupby("series")} if many else {})
            head = f"**{title} ({unit})**, per {step_s:g} s step" + (
                f"; outlier: {md(odd)}" if odd else ""
            )
            st.markdown(head)
            st.vega_lite_chart(df, _spec(f"{title} ({unit})", odd, clock), width="stretch")


def _spec(y_title: str, odd: str | None, clock: str) -> dict[str, Any]:
    utc = {"format": clock, "formatType": "utc", "title": "time (UTC, 24 h)"}
    enc: dict[str, Any] = {
        "x": {"field": "time", "type": "temporal", "scale": {"type": "utc"}, "axis": utc},
        "y": {"field": "value", "type": "quantitative", "title": y_title},
        "color": {"field": "series", "type": "nominal", "title": None},
        "tooltip": [
            {
                "field": "time",
                "type": "temporal",
                "format": "%Y-%m-%d %H:%M:%S UTC",
                "formatType": "utc",
            },
            {"field": "series", "type": "nominal"},
            {"field": "value", "type": "quantitative", "format": ".4g"},
        ],
    }
    if odd is not None:  # the outlier drawn thick and red, its peers thin and grey
        test = {"field": "series", "equal": odd}
        enc["color"] = {"condition": {"test": test, "value": "#d62728"}, "value": "#9e9e9e"}
        enc["strokeWidth"] = {"condition": {"test": test, "value": 3}, "value": 1}
        enc["detail"] = {"field": "series", "type": "nominal"}
    return {"mark": {"type": "line", "point": True}, "height": 220, "encoding": enc}


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
        "No target in the store yet: run `slotune agent --scrape …` on the GPU nodes (or "
        "`slotune demo`) to scrape engines into it."
    )
    st.stop()

pools = [ALL, *(r.summary.target for r in table.pools)]
pool = c3.selectbox(
    "Pool", pools, index=pools.index(query_choice("pool", pools, ALL)), key="pool_choice"
)
set_query("pool", None if pool == ALL else pool)

st.subheader(f"Pools, last {range_key}")
pool_frame = fleet_frame(table.pools, "pool")
pool_cols = fleet_columns(range_key, scale_latencies(pool_frame))
st.dataframe(
    pool_frame,
    column_config=pool_cols,
    hide_index=True,
    placeholder="",
    column_order=["pool", "targets", "gpu", "status", *pool_cols],
)
rows = [r for r in table.targets if pool == ALL or (r.pool or "(no pool)") == pool]
rows.sort(key=lambda r: (str(getattr(r.summary, group, None) or r.pool or ""), r.summary.target))
st.subheader(f"Targets by {md(group)}" + ("" if pool == ALL else f" in pool {md(pool)}"))
target_frame = fleet_frame(rows, group)
st.dataframe(
    target_frame,
    column_config=fleet_columns(range_key, scale_latencies(target_frame)),
    hide_index=True,
    placeholder="",
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
    series = _series(s, db_url(), picked, range_s, end, steps)
_charts(series, range_s, steps)
