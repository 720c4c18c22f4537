"""Alerts: every rule's state now grouped and coloured by severity, firing/resolved history
with acknowledgements, refreshing on its own; add threshold rules, silence, acknowledge a
firing alert, send a test notification."""

from __future__ import annotations

import time

import streamlit as st

from slotune.collector.alerts import (
    SHORTHAND_FORM,
    RuleStatus,
    evaluate_all,
    make_notifier,
    parse_rule,
    test_alerts,
)
from slotune.collector.durations import parse_duration_s
from slotune.collector.store import (
    AlertHistoryEntry,
    Store,
    ack_event,
    alert_history,
    delete_alert_rules,
    save_alert_rule,
    silence_rule,
)
from slotune.collector.views import ackable, by_severity, severity_rank
from slotune.ui.app._common import (
    LIVE_S,
    RANGES,
    db_url,
    explain,
    guarded,
    is_read_only,
    md,
    query_choice,
    set_query,
    show_error,
    store,
    when,
)


@st.cache_data(ttl=LIVE_S, show_spinner=False)
def _statuses(_store: Store, url: str | None, at: float) -> list[RuleStatus]:
    return evaluate_all(_store, at)


@st.cache_data(ttl=LIVE_S, show_spinner=False)
def _history(_store: Store, url: str | None, since: float) -> list[AlertHistoryEntry]:
    return alert_history(_store, since_ts=since)


def _clear() -> None:
    _statuses.clear()
    _history.clear()


# Colour by severity as a marker in the cell (plain text: no styling the table would drop).
_MARKS = {0: "🟥", 1: "🟥", 2: "🟧", 3: "🟧", 4: "🟨", 5: "🟦"}
_BADGES = {0: "red", 1: "red", 2: "orange", 3: "orange", 4: "yellow", 5: "blue"}
REFRESH_S = 15  # the tables refresh on their own, as Alertmanager's UI does


def _mark(severity: str) -> str:
    return f"{_MARKS.get(severity_rank(severity), '⬜')} {severity}"


def _status_row(s: RuleStatus) -> dict[str, object]:
    return {
        "severity": _mark(s.severity),
        "rule": s.rule,
        "kind": s.kind,
        "state": s.state.label,
        "value": s.value,
        "target": s.labels.get("target") or s.labels.get("slo") or "",
        "silenced until": when(s.silenced_until) if s.silenced_until else "",
        "message": s.message,
    }


def _forms(s: Store, statuses: list[RuleStatus], history: list[AlertHistoryEntry]) -> None:
    rules = sorted({x.rule for x in statuses})
    add, remove, silence, ack, test = st.tabs(
        ["Add or replace a rule", "Delete a rule", "Silence", "Acknowledge", "Test notification"]
    )
    with add, st.form("rule_form"):
        c1, c2, c3 = st.columns([1, 2, 1])
        name = c1.text_input("name", key="rule_name", placeholder="kv-full")
        expr = c2.text_input("condition", key="rule_expr", placeholder=SHORTHAND_FORM)
        severity = c3.selectbox("severity", ["warning", "ticket", "page"], key="rule_severity")
        if st.form_submit_button("Save rule"):
            try:
                rule = parse_rule(expr.strip(), name=name.strip(), severity=severity)
                if not rule.name:
                    raise ValueError("field 'name' is required (e.g. kv-full)")
                save_alert_rule(s, rule.to_info())
            except Exception as e:
                show_error(explain(e) if not isinstance(e, ValueError) else str(e))
            else:
                _clear()
                st.success(f"saved rule {md(rule.name)}: {md(rule.expr)}")
    with remove, st.form("delete_rule_form"):
        victim = st.selectbox("rule", rules, key="delete_rule")
        sure = st.checkbox("yes, delete it and its history", key="delete_sure")
        st.caption("An SLO's burn-rate rules come back when the SLO is saved again.")
        if st.form_submit_button("Delete rule"):
            if victim is None or not sure:
                st.error("pick a rule and tick 'yes, delete it and its history'")
            else:
                try:
                    delete_alert_rules(s, [victim])
                except Exception as e:
                    show_error(explain(e))
                else:
                    _clear()
                    st.success(f"deleted rule {md(victim)}")
    with silence, st.form("silence_form"):
        c1, c2, c3 = st.columns(3)
        rule_name = c1.selectbox("rule", rules, key="silence_rule")
        length = c2.text_input("for", value="1h", key="silence_for")
        comment = c3.text_input("comment", key="silence_comment")
        if st.form_submit_button("Silence"):
            try:
                if rule_name is None:
                    raise ValueError("no rule to silence yet")
                until = time.time() + parse_duration_s(length, field_name="field 'for'")
                silence_rule(s, rule_name, until, comment)
            except Exception as e:
                show_error(explain(e) if not isinstance(e, ValueError) else str(e))
            else:
                _clear()
                st.success(f"silenced {md(rule_name)} until {when(until)}")
    with ack, st.form("ack_form"):
        labels = {
            f"#{h.id} {h.event.rule} ({when(h.event.ts)})": h.id for h in ackable(history, statuses)
        }
        picked = st.selectbox("firing alert", list(labels), key="ack_event")
        comment = st.text_input("comment", key="ack_comment", placeholder="who is on it")
        if st.form_submit_button("Acknowledge"):
            if picked is None:
                st.error("no unacknowledged alert is firing now")
            else:
                try:
                    ack_event(s, labels[picked], comment)
                except Exception as e:
                    show_error(explain(e))
                else:
                    _clear()
                    st.success(f"acknowledged event {md(labels[picked])}")
    with test, st.form("test_form"):
        spec = st.text_input(
            "receiver",
            value="log",
            key="notify_spec",
            help="log, alertmanager=http://host:9093 or slack=https://hooks.slack.com/…",
        )
        if st.form_submit_button("Send test notification"):
            try:
                failures = test_alerts(make_notifier(spec.strip()))
            except Exception as e:
                show_error(explain(e))
            else:
                if failures:
                    show_error("; ".join(failures))
                else:
                    st.success("sent a test alert and its resolve")


def _groups(firing: list[RuleStatus]) -> None:
    counts: dict[str, int] = {}
    for x in firing:
        counts[x.severity] = counts.get(x.severity, 0) + 1
    badges = [
        f":{_BADGES.get(severity_rank(sev), 'gray')}-badge[{md(sev)}: {n} firing]"
        for sev, n in sorted(counts.items(), key=lambda kv: (severity_rank(kv[0]), kv[0]))
    ]
    if badges:
        st.markdown(" ".join(badges))


st.title("Alerts")
history_key = query_choice("history", list(RANGES), "7d")
history_key = st.selectbox("History", list(RANGES), index=list(RANGES).index(history_key))
set_query("history", history_key)


def _read() -> tuple[Store, float, list[RuleStatus], list[AlertHistoryEntry]]:
    with guarded():
        s = store()
        now = float(int(time.time() // LIVE_S) * LIVE_S)
        return s, now, _statuses(s, db_url(), now), _history(s, db_url(), now - RANGES[history_key])


@st.fragment(run_every=REFRESH_S)
def _tables() -> None:
    _, now, statuses, history = _read()
    firing = [x for x in statuses if x.state.value == "firing"]
    st.subheader(f"Firing now ({len(firing)})")
    _groups(firing)
    st.caption(f"every enabled rule evaluated at {when(now)}; refreshes every {REFRESH_S} s")
    if statuses:
        st.dataframe(
            [_status_row(x) for x in by_severity(statuses)],
            hide_index=True,
            placeholder="",
            column_config={"value": st.column_config.NumberColumn(format="%.3g")},
        )
    else:
        st.write("No alert rule yet: SLOs bring their burn-rate rules; add threshold rules below.")
    st.subheader(f"History, last {history_key}")
    if history:
        st.dataframe(
            [
                {
                    "id": h.id,
                    "time": when(h.event.ts),
                    "rule": h.event.rule,
                    "state": h.event.state.value,
                    "value": h.event.value,
                    "acknowledged": when(h.acked_at) if h.acked_at else "",
                    "message": h.event.message,
                }
                for h in reversed(history)
            ],
            hide_index=True,
            placeholder="",
        )
    else:
        st.write("No firing or resolved event in this range.")


_tables()
if not is_read_only():
    s, _, statuses, history = _read()
    with guarded():
        _forms(s, statuses, history)
