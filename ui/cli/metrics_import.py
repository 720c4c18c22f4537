"""``slotune metrics import``: load a metrics history file into the store (incident replay)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from slotune.collector.vocabulary import SourceKind
from slotune.ui.cli._common import JsonOption, console, db_url, print_json
from slotune.ui.cli.metrics import metrics_app


def register(app: typer.Typer) -> None:
    # ``metrics`` registers the group; this module adds a command to it.
    metrics_app.command("import")(import_cmd)


def import_cmd(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(
            help="Prometheus text (timestamps in milliseconds) or OpenMetrics (ending in "
            "'# EOF', timestamps in seconds), with a timestamp on each sample."
        ),
    ],
    target: Annotated[str, typer.Option(help="Target name the samples belong to.")],
    kind: Annotated[
        SourceKind,
        typer.Option(help="Whose metric names the file carries (a kind read as Prometheus text)."),
    ] = SourceKind.VLLM,
    json: JsonOption = False,
) -> None:
    """Load a past incident (metrics with timestamps) as scrapes of one target."""
    from slotune.collector.alerts import import_openmetrics
    from slotune.collector.store import open_store

    with open_store(db_url(ctx)) as store:
        result = import_openmetrics(store, file, target, kind)
    if json:
        print_json(result.to_dict())
    else:
        console.print(
            f"imported {result.num_samples} samples in {result.num_scrapes} scrapes of "
            f"{escape(result.target)}",
            highlight=False,
        )
