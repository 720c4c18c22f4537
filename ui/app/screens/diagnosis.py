"""Diagnosis: stored analyses (GPU time, prefix caching, chunked prefill) with their inputs."""

from __future__ import annotations

import streamlit as st

from slotune.collector.store import DiagnosisInfo, Store, list_diagnoses
from slotune.ui.app._common import TTL_S, db_url, guarded, md, store, when


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _diagnoses(_store: Store, url: str | None) -> list[DiagnosisInfo]:
    return list_diagnoses(_store, limit=200)


st.title("Diagnosis")
with guarded():
    items = _diagnoses(store(), db_url())
if not items:
    st.info("No diagnosis stored yet: `slotune diagnose trace|live|workload` stores one.")
    st.stop()
st.dataframe(
    [
        {"id": d.id, "kind": d.kind, "subject": d.subject, "created": when(d.created_at)}
        for d in items
    ],
    hide_index=True,
    placeholder="–",
)
for d in items[:20]:
    with st.expander(f"#{d.id} {md(d.kind)}: {md(d.subject or '-')} ({when(d.created_at)})"):
        st.markdown("**Findings**")
        st.json(dict(d.result))
        st.markdown("**Inputs**")
        st.json(dict(d.inputs), expanded=False)
