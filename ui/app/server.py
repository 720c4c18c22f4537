"""Start the dashboard: Streamlit's server on ``main.py``, settings handed over in the
environment (see ``_common``)."""

from __future__ import annotations

import os
from pathlib import Path

from slotune.ui.app._common import READ_ONLY_ENV

MAIN = Path(__file__).with_name("main.py")


def serve(
    url: str | None, host: str, port: int, read_only: bool, metrics_url: str | None = None
) -> None:
    """Run the dashboard until interrupted (Ctrl-C).

    Args:
        url: the store URL (None: the default SQLite file).
        host: address to bind (127.0.0.1 unless the dashboard must be reachable).
        port: TCP port.
        read_only: hide every control that writes.
        metrics_url: a query API to read metrics from (None: the store's samples).
    """
    from streamlit.web import bootstrap

    if url:
        os.environ["SLOTUNE_DB"] = url
    else:
        os.environ.pop("SLOTUNE_DB", None)
    if metrics_url:
        os.environ["SLOTUNE_METRICS"] = metrics_url
    else:
        os.environ.pop("SLOTUNE_METRICS", None)
    os.environ[READ_ONLY_ENV] = "1" if read_only else "0"
    flags = {
        "server.address": host,
        "server.port": port,
        "server.headless": True,
        "browser.gatherUsageStats": False,
        "client.toolbarMode": "viewer",
        "global.developmentMode": False,
    }
    bootstrap.load_config_options(flag_options=flags)
    bootstrap.run(str(MAIN), False, [], flags)
