"""The dashboard's entrypoint: ``slotune ui`` runs this file with Streamlit."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from slotune.ui.app._common import login_required

# Not "pages/": Streamlit would also build its automatic navigation from a folder of that
# name next to the main script, and a deep link's first load would show that one.
PAGES = Path(__file__).parent / "screens"
# A file of the package: a material icon as page icon is fetched from Google's font host,
# which an offline dashboard cannot reach.
ICON = Path(__file__).with_name("icon.png")

st.set_page_config(page_title="slotune", page_icon=str(ICON), layout="wide")
if login_required() and not st.user.get("is_logged_in"):
    # An [auth] section in .streamlit/secrets.toml turns on OIDC login (docs/ui.md).
    st.title("slotune")
    st.button("Log in", on_click=st.login, type="primary")
    st.stop()
page = st.navigation(
    [
        st.Page(PAGES / "overview.py", title="Overview", icon=":material/dashboard:", default=True),
        st.Page(PAGES / "fleet.py", title="Fleet", icon=":material/dns:", url_path="fleet"),
        st.Page(PAGES / "slos.py", title="SLOs", icon=":material/target:", url_path="slos"),
        st.Page(
            PAGES / "alerts.py", title="Alerts", icon=":material/notifications:", url_path="alerts"
        ),
        st.Page(
            PAGES / "benchmarks.py",
            title="Benchmarks",
            icon=":material/bar_chart:",
            url_path="benchmarks",
        ),
        st.Page(PAGES / "tuning.py", title="Tuning", icon=":material/tune:", url_path="tuning"),
        st.Page(
            PAGES / "diagnosis.py",
            title="Diagnosis",
            icon=":material/troubleshoot:",
            url_path="diagnosis",
        ),
        st.Page(
            PAGES / "fleet_plan.py",
            title="Fleet plans",
            icon=":material/hub:",
            url_path="fleet-plan",
        ),
    ]
)
page.run()
