"""``slotune targets list``: the endpoints and nodes agents registered."""

from __future__ import annotations

import time

import typer
from rich.markup import escape
from rich.table import Table

from slotune.ui.cli._common import JsonOption, console, db_url, metrics_client, print_json

# The store is imported inside the command: building the CLI (every slotune run, shell
# completion) must not load SQLAlchemy and Alembic.

targets_app = typer.Typer(help="Targets that agents scrape.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(targets_app, name="targets")


@targets_app.command("list")
def list_cmd(ctx: typer.Context, json: JsonOption = False) -> None:
    """List the registered targets (with --metrics: the query API's job/instance pairs seen in
    its lookback) with their labels and when they were last seen."""
    from slotune.collector.metrics import metrics_reader
    from slotune.collector.store import open_store

    with open_store(db_url(ctx)) as store:
        targets = metrics_reader(store, metrics_client(ctx)).targets(time.time())
    if json:
        print_json(
            [
                {
                    "name": t.name,
                    "kind": t.kind,
                    "url": t.url,
                    "labels": dict(t.labels),
                    "node": t.node,
                    "pool": t.pool,
                    "model": t.model,
                    "created_at": t.created_at,
                    "last_seen_at": t.last_seen_at,
                }
                for t in targets
            ]
        )
        return
    table = Table("name", "kind", "url", "node", "pool", "model", "last seen")
    now = time.time()
    for t in targets:
        seen = "never" if t.last_seen_at is None else f"{now - t.last_seen_at:.0f} s ago"
        cells = (t.name, t.kind, t.url, t.node or "", t.pool or "", t.model or "")
        table.add_row(*(escape(c) for c in cells), seen)  # user text, not markup
    console.print(table)
