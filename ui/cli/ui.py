"""``slotune ui``: the Streamlit dashboard on the store (see docs/ui.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from slotune.ui.cli._common import console, db_url, metrics_url

# Streamlit is imported inside the command: building the CLI must stay light.


def register(app: typer.Typer) -> None:
    @app.command("ui")
    def ui_command(
        ctx: typer.Context,
        host: Annotated[
            str, typer.Option(help="Address to bind; 0.0.0.0 exposes the dashboard to the network.")
        ] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8501,
        read_only: Annotated[
            bool, typer.Option("--read-only", help="Hide every control that writes to the store.")
        ] = False,
    ) -> None:
        """Dashboard: fleet, SLOs and alerts, benchmarks, tuning studies, diagnoses."""
        from slotune.collector.store import default_db_url, redact_url
        from slotune.ui.app.server import serve

        url = db_url(ctx)
        console.print(
            f"slotune ui: http://{host}:{port} on {redact_url(url or default_db_url())}"
            + (" (read-only)" if read_only else ""),
            highlight=False,
        )
        serve(url, host, port, read_only, metrics_url(ctx))
