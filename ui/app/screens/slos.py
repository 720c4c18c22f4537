"""SLOs: attainment, error budget left and burn rates per window; create, edit, delete."""

from __future__ import annotations

import time

import plotly.graph_objects as go
import streamlit as st

from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.slo import SLO
from slotune.collector.store import Store, delete_slo, list_slos
from slotune.collector.views import SLOStatus, slo_statuses
from slotune.collector.views.forms import FORM_SOURCE, slo_from_fields
from slotune.ui.app._common import (
    LIVE_S,
    TTL_S,
    db_url,
    explain,
    guarded,
    is_read_only,
    md,
    show_error,
    store,
    strip_source,
    when,
)
from slotune.ui.app.tables import burn_labels, slo_columns, slo_frame

NEW = "(new SLO)"


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _statuses(_store: Store, url: str | None, end: float) -> list[SLOStatus]:
    return slo_statuses(_store, end_ts=end)


def _burn_chart(statuses: list[SLOStatus]) -> go.Figure:
    fig = go.Figure()
    windows = burn_labels(statuses)
    for s in statuses:
        fig.add_bar(
            name=s.slo.name,
            x=[f"burn rate {w}" for w in windows],
            y=[s.burn_rates.get(w) for w in windows],
        )
    fig.add_hline(
        y=1.0, line_dash="dot", annotation_text="1× spends the budget by the window's end"
    )
    fig.update_layout(
        barmode="group", height=320, margin={"t": 30}, yaxis_title="burn rate (× budget)"
    )
    return fig


def _budget_chart(statuses: list[SLOStatus]) -> go.Figure:
    fig = go.Figure(
        go.Bar(
            x=[s.slo.name for s in statuses],
            y=[None if s.budget_left is None else s.budget_left * 100 for s in statuses],
            marker_color=["#d62728" if (s.budget_left or 0) <= 0 else "#2ca02c" for s in statuses],
        )
    )
    fig.update_layout(height=320, margin={"t": 30}, yaxis_title="error budget left (%)")
    return fig


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
    st.dataframe(slo_frame(statuses), column_config=slo_columns(statuses), hide_index=True)
    c1, c2 = st.columns(2)
    c1.plotly_chart(_budget_chart(statuses), width="stretch")
    c2.plotly_chart(_burn_chart(statuses), width="stretch")
else:
    st.info("No SLO declared yet" + ("." if is_read_only() else ": create one below."))
if not is_read_only():
    st.subheader("Create, edit or delete")
    with guarded():
        _form(s, list_slos(s))
