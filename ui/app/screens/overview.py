"""Overview: targets up/down, SLOs met/burning/breached with budget left, firing alerts, the
latest study's best vs default."""

from __future__ import annotations

from urllib.parse import quote

import streamlit as st

from slotune.collector.store import Store
from slotune.collector.views import Overview, SLOState, overview, window_label
from slotune.tuner import StudyListing
from slotune.ui.app._common import LIVE_S, TTL_S, db_url, guarded, md, metrics, store, when
from slotune.ui.app.tables import slo_columns, slo_frame


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _overview(_store: Store, url: str | None) -> Overview:
    return overview(_store, metrics=metrics())


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _latest_study(url: str | None) -> StudyListing | None:
    from slotune.tuner import list_studies_report

    studies = list_studies_report(url)
    return studies[0] if studies else None


st.title("Overview")


@st.fragment(run_every=LIVE_S)
def live() -> None:
    with guarded():
        o = _overview(store(), db_url())
        study = _latest_study(db_url())
    st.caption(f"as of {when(o.end_ts)}; targets by their newest `up` sample")
    cols = st.columns(4)
    cols[0].metric("Targets up", f"{o.num_up} / {o.num_targets}")
    cols[0].caption(
        f"{o.num_down} down, {o.num_stale} not scraped in the last {window_label(o.stale_after_s)}"
    )
    cols[1].metric("SLOs met", f"{o.count(SLOState.MET)} / {len(o.slos)}")
    cols[1].caption(
        f"{o.count(SLOState.BURNING)} burning, {o.count(SLOState.BREACHED)} breached, "
        f"{o.count(SLOState.NO_DATA)} without data"
    )
    cols[2].metric("Alerts firing", len(o.firing))
    if study is None:
        cols[3].metric("Latest study", "none")
    else:
        gain = study.gain
        cols[3].metric(
            f"Latest study: {md(study.name)}",
            "-" if gain is None else f"{gain:.2f}× default",
        )
        cols[3].caption(f"{md(study.status)}, {md(study.objective)}, {study.trials or 0} trials")
    if not o.num_targets and not o.slos:
        st.info(
            "The store is empty: start an agent (`slotune agent`), declare SLOs "
            "(`slotune slo apply`) or run `slotune demo` to fill it."
        )
    st.subheader("SLOs")
    if o.slos:
        st.dataframe(
            slo_frame(o.slos), column_config=slo_columns(o.slos), hide_index=True, placeholder="–"
        )
    else:
        st.write("No SLO declared yet: see the SLOs page.")
    st.subheader("Firing alerts")
    if o.firing:
        st.dataframe(
            [
                {"rule": e.rule, "severity": e.severity, "value": e.value, "message": e.message}
                for e in o.firing
            ],
            hide_index=True,
            placeholder="–",
        )
    else:
        st.write("No alert is firing.")
    if study is not None:
        st.subheader("Latest study")
        best = study.best_value
        gain = study.gain
        st.write(
            f"**{md(study.name)}** ({md(study.engine)} {md(study.model)} on {md(study.gpu)}, "
            f"SLOs {md(', '.join(study.slos))}): best {md(study.objective)} "
            + ("-" if best is None else f"{best:.3g}")
            + ", gain over the default "
            + ("-" if gain is None else f"{gain:.2f}×")
        )
        st.markdown(f"[Open it on the Tuning page](tuning?study={quote(study.name, safe='')})")


live()
