"""``slotune db``: schema migrations and retention of the store."""

from __future__ import annotations

from typing import Annotated

import typer

from slotune.ui.cli._common import JsonOption, console, db_url, print_json

# Library modules are imported inside the commands: building the CLI (every slotune run, shell
# completion) must not load the store (SQLAlchemy, Alembic) or numpy.

db_app = typer.Typer(
    help="Create, upgrade and prune the store (SQLite file or PostgreSQL).", no_args_is_help=True
)


@db_app.command("upgrade")
def upgrade_cmd(ctx: typer.Context, json: JsonOption = False) -> None:
    """Create the schema or migrate it to this slotune's revision."""
    from slotune.collector.store import schema_status, upgrade

    revision = upgrade(db_url(ctx))
    status = schema_status(db_url(ctx))
    if json:
        print_json(status.to_dict())
    else:
        console.print(f"{status.url}: schema at revision {revision} (up to date)", highlight=False)


@db_app.command("current")
def current_cmd(ctx: typer.Context, json: JsonOption = False) -> None:
    """Show the database's schema revision and the one this slotune expects."""
    from slotune.collector.store import schema_status

    status = schema_status(db_url(ctx))
    if json:
        print_json(status.to_dict())
        return
    state = "up to date" if status.is_current else "run `slotune db upgrade`"
    if status.current is not None and not status.is_current:
        state = "differs from this slotune"
    console.print(
        f"{status.url}: revision {status.current or 'none'}, expected {status.head} ({state})",
        highlight=False,
    )


@db_app.command("prune")
def prune_cmd(
    ctx: typer.Context,
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", help="Delete samples and alert events older than this (e.g. 30d)."
        ),
    ],
    rollup_after: Annotated[
        str | None,
        typer.Option(
            "--rollup-after",
            help="Also roll samples older than this up to 1-minute points (e.g. 2d).",
        ),
    ] = None,
    vacuum_: Annotated[
        bool,
        typer.Option(
            "--vacuum/--no-vacuum",
            help="Then give the freed space back (SQLite: VACUUM rewrites the file, blocking "
            "writers meanwhile; PostgreSQL: VACUUM ANALYZE of the pruned tables).",
        ),
    ] = True,
    json: JsonOption = False,
) -> None:
    """Delete old telemetry and roll up older samples; runs, SLOs and studies are kept."""
    from slotune.collector.durations import parse_duration_s
    from slotune.collector.store import open_store, prune, rollup, vacuum

    older_s = parse_duration_s(older_than, field_name="--older-than")
    after_s = (
        None
        if rollup_after is None
        else parse_duration_s(rollup_after, field_name="--rollup-after")
    )
    with open_store(db_url(ctx)) as store:
        report: dict[str, dict[str, int | None]] = {"pruned": {**prune(store, older_s).to_dict()}}
        if after_s is not None:
            report["rolled_up"] = {**rollup(store, after_s).to_dict()}
        if vacuum_:
            report["vacuumed"] = {"bytes_freed": vacuum(store)}
    if json:
        print_json(report)
        return
    for action, counts in report.items():
        console.print(
            f"{action}: " + ", ".join(f"{'-' if n is None else n} {k}" for k, n in counts.items()),
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
