"""SLOs: attainment and error budget left; per SLO the budget burn-down, the SLI over time and
the fast/slow burn-rate pairs it is paged on; create, edit, delete."""

from __future__ import annotations

import time
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from slotune.collector.alerts import apply_slos
from slotune.collector.slo import SLO
from slotune.collector.store import Store, delete_slo, list_slos
from slotune.collector.views import (
    FORM_SOURCE,
    SLOHistory,
    SLOStatus,
    slo_from_fields,
    slo_history,
    slo_statuses,
    window_label,
)
from slotune.ui.app._common import (
    LIVE_S,
    TTL_S,
    db_url,
    explain,
    guarded,
    is_read_only,
    md,
    metrics,
    query_choice,
    set_query,
    show_error,
    store,
    strip_source,
    time_axis,
    utc_times,
    when,
)
from slotune.ui.app.tables import slo_columns, slo_frame

NEW = "(new SLO)"


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _statuses(_store: Store, url: str | None, end: float) -> list[SLOStatus]:
    return slo_statuses(_store, end_ts=end, metrics=metrics())


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _history(_store: Store, url: str | None, name: str, end: float) -> SLOHistory | None:
    slo = next((x for x in list_slos(_store) if x.name == name), None)
    return None if slo is None else slo_history(_store, slo, end, metrics=metrics())


def _budget_chart(statuses: list[SLOStatus]) -> go.Figure:
    fig = go.Figure(
        go.Bar(
            x=[s.slo.name for s in statuses],
            y=[None if s.budget_shown is None else s.budget_shown * 100 for s in statuses],
            text=[_budget_text(s) for s in statuses],
            marker_color=["#d62728" if (s.budget_shown or 0) <= 0 else "#2ca02c" for s in statuses],
        )
    )
    fig.update_layout(
        height=320, margin={"t": 30}, yaxis={"title": "error budget left (%)", "range": [0, 100]}
    )
    return fig


def _budget_text(s: SLOStatus) -> str:
    if s.budget_shown is None:
        return "no data"
    over = s.overspent_by
    return f"{s.budget_shown * 100:.1f} %" + ("" if over is None else f" (overspent {over:.1f}×)")


def _pairs_chart(s: SLOStatus) -> go.Figure:
    """Each fast/slow condition as it is paged on: both windows' burn rates and the factor
    both must pass."""
    labels = [p.label for p in s.pairs]
    fig = go.Figure()
    fig.add_bar(name="long window", x=labels, y=[p.long_rate for p in s.pairs])
    fig.add_bar(name="short window", x=labels, y=[p.short_rate for p in s.pairs])
    fig.add_scatter(
        name="threshold",
        x=labels,
        y=[p.factor for p in s.pairs],
        mode="markers",
        marker={"symbol": "line-ew-open", "size": 40, "color": "#d62728", "line": {"width": 3}},
    )
    fig.update_layout(
        barmode="group",
        height=320,
        margin={"t": 30},
        yaxis_title="burn rate (× budget)",
        legend={"orientation": "h"},
    )
    return fig


def _percent_line(h: SLOHistory, values: list[float | None], yaxis: dict[str, Any]) -> go.Figure:
    fig = go.Figure(
        go.Scatter(
            x=utc_times([p.ts for p in h.points]),
            y=[None if v is None else v * 100 for v in values],
            mode="lines+markers",
        )
    )
    fig.update_layout(height=300, margin={"t": 30}, yaxis=yaxis)
    return time_axis(fig)


def _burndown_chart(h: SLOHistory) -> go.Figure:
    yaxis = {"title": "error budget left (%)", "range": [0, 100]}
    return _percent_line(h, [p.budget_left for p in h.points], yaxis)


def _sli_chart(h: SLOHistory) -> go.Figure:
    yaxis = {"title": f"good requests per {window_label(h.step_s)} (%)"}
    fig = _percent_line(h, [p.sli for p in h.points], yaxis)
    fig.add_hline(
        y=h.slo.objective * 100, line_dash="dot", annotation_text="objective", line_color="#d62728"
    )
    return fig


def _detail(s: Store, statuses: list[SLOStatus], end: float) -> None:
    names = [x.slo.name for x in statuses]
    name = query_choice("slo", names, names[0])
    pick = st.selectbox("SLO", names, index=names.index(name), key="slo_detail")
    set_query("slo", pick if pick != names[0] else None)
    cur = next(x for x in statuses if x.slo.name == pick)
    h = _history(s, db_url(), pick, end)
    c1, c2 = st.columns(2)
    if h is not None:
        c1.plotly_chart(_burndown_chart(h), width="stretch")
        c2.plotly_chart(_sli_chart(h), width="stretch")
    if cur.pairs:
        st.plotly_chart(_pairs_chart(cur), width="stretch")
    else:
        st.caption("an objective of 100 % has no budget, so no burn rate")


def _form(s: Store, existing: list[SLO]) -> None:
    names = [NEW, *(x.name for x in existing)]
    pick = st.selectbox("SLO to create or edit", names, key="slo_pick")
    cur = next((x for x in existing if x.name == pick), None)
    with st.form("slo_form"):
        c1, c2 = st.columns(2)
        name = c1.text_input(
            key="slo_name", label="name", value=cur.name if cur else "", placeholder="chat-ttft"
        )
        spec = c2.text_input(
            key="slo_spec",
            label="objective (shorthand)",
            value=cur.spec if cur else "",
            placeholder="ttft:p99<=500ms, itl:p95<=50ms, e2e:p99<=20s, error_rate<=1%",
        )
        c3, c4 = st.columns(2)
        window = c3.text_input(
            key="slo_window",
            label="window",
            value=f"{cur.window_s / 86400:g}d" if cur else "30d",
            help="e.g. 30d, 7d",
        )
        objective = c4.text_input(
            key="slo_objective",
            label="good fraction required",
            value=f"{cur.objective * 100:g}%" if cur else "",
            help="empty: the percentile's (p99 → 99 %)",
        )
        c5, c6, c7 = st.columns(3)
        model = c5.text_input(
            key="slo_model",
            label="selector: model",
            value=(cur.selector.model or "") if cur else "",
        )
        pool = c6.text_input(
            key="slo_pool", label="selector: pool", value=(cur.selector.pool or "") if cur else ""
        )
        target = c7.text_input(
            key="slo_target",
            label="selector: target",
            value=(cur.selector.target or "") if cur else "",
        )
        description = st.text_input(
            key="slo_description", label="description", value=cur.description if cur else ""
        )
        if st.form_submit_button("Save SLO"):
            try:
                slo = slo_from_fields(
                    name=name,
                    spec=spec,
                    window=window,
                    objective=objective,
                    model=model,
                    pool=pool,
                    target=target,
                    description=description,
                )
                notes = apply_slos(s, [slo])
            except Exception as e:
                show_error(strip_source(explain(e), FORM_SOURCE))
            else:
                _statuses.clear()
                st.success(f"saved SLO {md(slo.name)} ({md(slo.spec)}) and its burn-rate alerts")
                for note in notes:
                    st.caption(md(note))
    with st.form("slo_delete"):
        victim = st.selectbox(
            key="slo_victim", label="SLO to delete", options=[x.name for x in existing]
        )
        sure = st.checkbox("yes, delete it", key="slo_sure")
        if st.form_submit_button("Delete SLO"):
            if not sure or victim is None:
                st.error("tick 'yes, delete it' to delete the SLO")
            else:
                try:
                    delete_slo(s, victim)
                except Exception as e:
                    show_error(explain(e))
                else:
                    _statuses.clear()
                    st.success(f"deleted SLO {md(victim)}")


st.title("SLOs")
with guarded():
    s = store()
    end = float(int(time.time() // LIVE_S) * LIVE_S)
    statuses = _statuses(s, db_url(), end)
st.caption(f"as of {when(end)}; attainment and budget over each SLO's window")
if statuses:
    st.dataframe(
        slo_frame(statuses), column_config=slo_columns(statuses), hide_index=True, placeholder="–"
    )
    st.plotly_chart(_budget_chart(statuses), width="stretch")
    st.subheader("Over the window")
    with guarded():
        _detail(s, statuses, end)
else:
    st.info("No SLO declared yet" + ("." if is_read_only() else ": create one below."))
if not is_read_only():
    st.subheader("Create, edit or delete")
    with guarded():
        _form(s, list_slos(s))
