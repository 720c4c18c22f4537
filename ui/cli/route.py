"""``slotune route``: the request-aware OpenAI-compatible proxy in front of a fleet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("route")
    def route(
        config: Annotated[
            Path,
            typer.Option("--config", help="Fleet file: backends, pools, policy (docs/fleet.md)."),
        ],
        host: Annotated[
            str, typer.Option("--host", help="Address to bind (0.0.0.0 to serve other hosts).")
        ] = "127.0.0.1",
        port: Annotated[
            int, typer.Option("--port", min=0, max=65535, help="Port to bind (0: any free one).")
        ] = 8080,
    ) -> None:
        """Serve an OpenAI-compatible proxy that routes each request by policy.

        Reads each backend's load from its /metrics, ejects failing backends, sheds with 429,
        and exposes its own Prometheus metrics at /metrics. Example: slotune route --config
        examples/fleet.yaml --port 8080
        """
        from slotune.tuner.fleet import serve

        serve(config, host, port)
