"""Alerts: rules, what fires now, history; create threshold and burn-rate rules."""

from __future__ import annotations

import time

import streamlit as st

from slotune.collector.agent.canonical import CANONICAL
from slotune.collector.store import (
    AlertEventInfo,
    AlertRuleInfo,
    Store,
    list_alert_events,
    list_alert_rules,
    list_slos,
    save_alert_rule,
)
from slotune.collector.views import firing_alerts
from slotune.collector.views.forms import (
    OPS,
    burn_rule_from_fields,
    threshold_rule_from_fields,
)
from slotune.ui.app._common import (
    RANGES,
    TTL_S,
    db_url,
    explain,
    guarded,
    is_read_only,
    query_choice,
    set_query,
    store,
    when,
)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _read(
    _store: Store, url: str | None, since: float
) -> tuple[list[AlertRuleInfo], list[AlertEventInfo], list[AlertEventInfo]]:
    return (
        list_alert_rules(_store),
        firing_alerts(_store),
        list_alert_events(_store, since_ts=since),
    )


def _rule_row(r: AlertRuleInfo) -> dict[str, object]:
    what = (
        f"error budget burn of SLO {r.slo_name}"
        if r.kind == "slo_burn"
        else f"{r.metric} {r.op} {r.threshold:g} ({CANONICAL[r.metric].unit})"
        if r.metric in CANONICAL and r.threshold is not None
        else f"{r.metric} {r.op} {r.threshold}"
    )
    return {
        "name": r.name,
        "kind": r.kind,
        "condition": what,
        "for (s)": r.for_s,
        "severity": r.severity,
        "enabled": r.enabled,
    }


def _forms(s: Store) -> None:
    kind = st.radio("New rule", ["threshold on a metric", "SLO burn rate"], horizontal=True)
    with st.form("rule_form"):
        name = st.text_input("name", placeholder="kv-usage-high")
        if kind == "threshold on a metric":
            c1, c2, c3, c4 = st.columns(4)
            metric = c1.selectbox(
                "metric", sorted(CANONICAL), index=sorted(CANONICAL).index("kv_usage")
            )
            op = c2.selectbox("op", OPS)
            threshold = c3.text_input("threshold (in the metric's unit)", placeholder="0.9")
            for_ = c4.text_input("for", value="5m")
        else:
            slos = [x.name for x in list_slos(s)]
            slo_name = st.selectbox("SLO", slos)
        if st.form_submit_button("Save rule"):
            try:
                rule = (
                    threshold_rule_from_fields(
                        name=name, metric=metric, op=op, threshold=threshold, for_=for_
                    )
                    if kind == "threshold on a metric"
                    else burn_rule_from_fields(name=name, slo_name=slo_name or "", known_slos=slos)
                )
                save_alert_rule(s, rule)
            except Exception as e:
                st.error(explain(e))
            else:
                _read.clear()
                st.success(f"saved rule {rule.name}")


st.title("Alerts")
history = query_choice("history", list(RANGES), "7d")
history = st.selectbox("History", list(RANGES), index=list(RANGES).index(history))
set_query("history", history)
with guarded():
    s = store()
    rules, firing, events = _read(s, db_url(), float(int(time.time()) - RANGES[history]))
st.subheader("Firing now")
if firing:
    st.dataframe(
        [
            {"rule": e.rule, "since": when(e.ts), "value": e.value, "message": e.message}
            for e in firing
        ],
        hide_index=True,
    )
else:
    st.write("No alert is firing.")
st.subheader("Rules")
if rules:
    st.dataframe([_rule_row(r) for r in rules], hide_index=True)
else:
    st.write("No alert rule yet.")
st.subheader(f"History, last {history}")
if events:
    st.dataframe(
        [
            {
                "time": when(e.ts),
                "rule": e.rule,
                "state": e.state.value,
                "value": e.value,
                "message": e.message,
            }
            for e in reversed(events)
        ],
        hide_index=True,
    )
else:
    st.write("No firing or resolved event in this range.")
if not is_read_only():
    st.subheader("Create a rule")
    with guarded():
        _forms(s)
