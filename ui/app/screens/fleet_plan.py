"""Fleet plans: stored `fleet simulate`, `plan capacity` and `plan autoscale` results."""

from __future__ import annotations

from typing import Any

import streamlit as st

from slotune.collector.plans import CapacityPlan, SheddingPlan
from slotune.collector.store import DiagnosisInfo, Store
from slotune.collector.views import (
    FLEET_AUTOSCALE,
    FLEET_PLAN,
    PolicyResult,
    StoredAutoscale,
    autoscale_plan,
    capacity_plan,
    fleet_results,
    sim_policies,
)
from slotune.ui.app._common import (
    TTL_S,
    code,
    db_url,
    guarded,
    md,
    query_choice,
    set_query,
    store,
    when,
)

_LATENCY_NAMES = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "e2e": "E2E"}
# Every number column names its unit in parentheses; the unit picks the cell format.
_FORMATS = {
    "(ms)": "%.1f ms",
    "(req/s)": "%.2f req/s",
    "(%)": "%.1f %%",
    "(GPU·h)": "%.3f GPU·h",
    "(USD/h)": "$%.2f/h",
}


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _results(_store: Store, url: str | None) -> list[DiagnosisInfo]:
    return fleet_results(_store)


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _pct(share: float | None) -> float | None:
    return None if share is None else share * 100.0


def _table(rows: list[dict[str, Any]], special: dict[str, Any] | None = None) -> None:
    """Rows as a table; a number column's format comes from the unit its name ends with."""
    columns: dict[str, Any] = {
        c: st.column_config.NumberColumn(format=f)
        for c in (rows[0] if rows else {})
        for unit, f in _FORMATS.items()
        if c.endswith(unit)
    }
    st.dataframe(rows, hide_index=True, column_config=columns | (special or {}), placeholder="–")


def _show_sim(policies: list[PolicyResult]) -> None:
    if not policies:
        st.info("This simulation stored no policy: run `slotune fleet simulate` again.")
        return
    st.subheader("Routing policies, best goodput under the SLOs first")
    rows: list[dict[str, Any]] = []
    for p in policies:
        row: dict[str, Any] = {"policy": p.policy, "SLOs met": p.slos_met}
        for m, name in _LATENCY_NAMES.items():
            row[f"{name} p50 (ms)"] = p.p50_ms[m]
            row[f"{name} p99 (ms)"] = p.p99_ms[m]
        row |= {
            "goodput (req/s)": p.goodput,
            "prefix hit (%)": _pct(p.prefix_hit_rate),
            "shed (%)": _pct(p.shed_share),
            "SLO violations (requests)": p.slo_violations,
            "GPU-hours (GPU·h)": p.gpu_hours,
        }
        rows.append(row)
    _table(rows)
    st.markdown("**Goodput per policy (req/s meeting every SLO)**")
    st.bar_chart(
        [{"policy": p.policy, "goodput (req/s)": p.goodput} for p in policies],
        x="policy",
        y="goodput (req/s)",
        horizontal=True,
        sort="-goodput (req/s)",
    )
    names = [p.policy for p in policies]
    chosen = query_choice("policy", names, names[0])
    chosen = st.selectbox("Per-replica load under", names, index=names.index(chosen))
    set_query("policy", chosen)
    picked = next(p for p in policies if p.policy == chosen)
    busy = st.column_config.ProgressColumn(format="%.0f %%", min_value=0, max_value=100)
    _table(
        [
            {
                "replica": r.name,
                "pool": r.pool,
                "requests": r.num_requests,
                "busy (%)": _pct(r.busy_fraction),
                "queue mean (ms)": r.queue_ms_mean,
                "queue p99 (ms)": r.queue_ms_p99,
                "prefix hit (%)": _pct(r.prefix_hit_rate),
                "GPU-hours (GPU·h)": r.gpu_hours,
            }
            for r in picked.replicas
        ],
        special={"busy (%)": busy},
    )


def _show_plan(plan: CapacityPlan) -> None:
    layouts = [plan.one_pool] + ([plan.split] if plan.split is not None else [])
    chosen = next(lay for lay in layouts if lay.layout == plan.chosen)
    a, b, c = st.columns(3)
    a.metric("GPUs at peak", _gpus(chosen.gpus))
    b.metric("cost per hour", f"${chosen.cost_per_hour:,.2f}/h")
    c.metric("cost per million tokens", f"${chosen.cost_per_million_tokens:,.3f}/M tokens")
    if plan.split is None:
        st.info("Only one pool was priced: no long/short split to compare.")
    else:
        one, split = plan.one_pool, plan.split
        verdict = ("The long/short split pays" if plan.split_pays else "One pool is cheaper") + (
            f": split at {split.threshold_tokens:,.0f} tokens ${split.cost_per_hour:,.2f}/h "
            f"({_gpus(split.gpus)}) vs one pool ${one.cost_per_hour:,.2f}/h ({_gpus(one.gpus)})."
        )
        (st.success if plan.split_pays else st.info)(verdict)
    st.caption(
        f"Peak {plan.peak_rate:,.2f} req/s, mean {plan.mean_rate:,.2f} req/s, "
        f"headroom {plan.headroom * 100:.0f} %, GPU prices as of {plan.prices_as_of} (USD/GPU·h)."
    )
    st.subheader("Replicas per pool")
    _table(
        [
            {
                "layout": lay.layout,
                "pool": p.pool,
                "model": p.model,
                "GPU": p.gpu,
                "request share (%)": p.request_share * 100.0,
                "peak rate (req/s)": p.peak_rate,
                "capacity per replica (req/s)": p.capacity_rps,
                "replicas": p.replicas,
                "GPUs": p.gpus,
                "cost (USD/h)": p.cost_per_hour,
            }
            for lay in layouts
            for p in lay.pools
        ]
    )


def _show_autoscale(stored: StoredAutoscale) -> None:
    plan = stored.plan
    st.subheader(f"Scaling policies (routing {md(plan.routing)})")
    _table(
        [
            {
                "scaling": p.scaling,
                "SLOs met": p.slos_met,
                "SLO violations (requests)": p.slo_violations,
                "shed (requests)": p.shed,
                "GPU-hours (GPU·h)": p.gpu_hours,
                "max replicas": p.max_replicas,
                "goodput (req/s)": p.goodput,
                "TTFT p99 (ms)": p.ttft_ms.p99,
                "grows first": " → ".join(p.grow_order) or "-",
                "shrinks first": " → ".join(p.shrink_order) or "-",
            }
            for p in plan.results
        ]
    )
    points = [
        {"policy": p.scaling, "time (s)": t, "replicas": n}
        for p, timeline in zip(plan.results, stored.timelines, strict=True)
        for t, n in timeline
    ]
    if points:
        st.markdown("**Replicas over time (s)**")
        st.line_chart(points, x="time (s)", y="replicas", color="policy")
    else:
        st.caption("No policy scaled during the replay: the replica count stayed constant.")
    if stored.shedding is not None:
        _show_shedding(stored.shedding)


def _show_shedding(s: SheddingPlan) -> None:
    st.subheader("Load-shedding thresholds")
    target = f"{s.wrong_shed_target:.0%}"
    if s.recommended_margin is None:
        st.info(
            f"No {code(f'slo-aware:{s.routing}')} margin both keeps admitted requests within the TTFT "
            f"SLOs under the overload and wrongly sheds under {target} of the absorbable burst."
        )
    else:
        st.success(
            f"Recommended: {code(f'slo-aware:{s.routing}:margin={s.recommended_margin:g}')}."
        )
    absorbable = "-" if s.absorbable_factor is None else f"{s.absorbable_factor:g}×"
    overload = f"{s.overload_factor:g}×"
    st.caption(
        f"A {s.burst_s:g} s burst at the busiest moment: absorbable without shedding up to "
        f"{absorbable} the traffic, TTFT SLOs broken from {overload}; target: under {target} of "
        "the absorbable burst shed."
    )
    _table(
        [
            {
                "margin (× TTFT budget)": m.margin,
                "absorbable burst shed (%)": _pct(m.burst_shed_share),
                "overload shed (%)": m.overload_shed_share * 100.0,
                "overload TTFT met": m.overload_ttft_met,
            }
            for m in s.margins
        ]
    )


st.title("Fleet plans")
with guarded():
    items = _results(store(), db_url())
if not items:
    st.info(
        "No fleet result stored yet: `slotune fleet simulate`, `slotune plan capacity` or "
        "`slotune plan autoscale` stores one."
    )
    st.stop()
st.dataframe(
    [
        {"id": d.id, "kind": d.kind, "subject": d.subject, "created": when(d.created_at)}
        for d in items
    ],
    hide_index=True,
    placeholder="–",
)
by_id = {str(d.id): d for d in items}
picked_id = query_choice("result", list(by_id), str(items[0].id))
picked_id = st.selectbox(
    "Result",
    list(by_id),
    index=list(by_id).index(picked_id),
    format_func=lambda i: f"#{i} {by_id[i].kind}: {by_id[i].subject or '-'}",
)
set_query("result", picked_id)
picked = by_id[picked_id]
with guarded():  # a row of another shape is one message before anything of it is drawn
    parsed: CapacityPlan | StoredAutoscale | list[PolicyResult] = (
        capacity_plan(picked)
        if picked.kind == FLEET_PLAN
        else autoscale_plan(picked)
        if picked.kind == FLEET_AUTOSCALE
        else sim_policies(picked)
    )
if isinstance(parsed, CapacityPlan):
    _show_plan(parsed)
elif isinstance(parsed, StoredAutoscale):
    _show_autoscale(parsed)
else:
    _show_sim(parsed)
