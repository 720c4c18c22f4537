"""The Streamlit dashboard (``slotune ui``): one file per page under ``screens/``.

``main.py`` is the entrypoint (``st.navigation``); every page calls the same query functions
the command line and the tests call (``collector.views``, ``collector.store``, ``tuner``) and
holds no SQL and no business logic.
"""
