"""``slotune slo``: declare, list and delete SLOs."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from slotune.collector.textfile import write_text
from slotune.collector.vocabulary import DEFAULT_ENGINE, Engine
from slotune.ui.cli._common import (
    JsonOption,
    console,
    db_url,
    err_console,
    metrics_client,
    output_file,
    print_json,
    say,
)

if TYPE_CHECKING:
    from slotune.collector.slo import SLO

# Library modules are imported inside the commands: building the CLI (every slotune run, shell
# completion) must not load the store (SQLAlchemy, Alembic) or numpy.


class ExportFormat(StrEnum):
    PROMETHEUS = "prometheus"
    GRAFANA = "grafana"
    GRAFANA_FLEET = "grafana-fleet"


slo_app = typer.Typer(
    help="Declare service-level objectives (see docs/slo.md).", no_args_is_help=True
)


@slo_app.command("apply")
def apply_cmd(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(
            help="SLO YAML file (examples/slos.yaml) or OpenSLO v1 (examples/openslo.yaml)."
        ),
    ],
    scrape_interval: Annotated[
        str,
        typer.Option(
            "--scrape-interval",
            help="The agents' scrape interval: shorter alert windows are refused.",
        ),
    ] = "5s",
    json: JsonOption = False,
) -> None:
    """Create or replace the SLOs of a YAML file and their alerts (all of them or none)."""
    from slotune.collector.alerts import apply_slos, load_slo_documents
    from slotune.collector.durations import parse_duration_s
    from slotune.collector.store import open_store

    min_window_s = parse_duration_s(scrape_interval, field_name="--scrape-interval")
    slos = load_slo_documents(file)
    with open_store(db_url(ctx)) as store:
        notes = apply_slos(store, slos, min_window_s=min_window_s)
    for note in notes:
        err_console.print(f"note: {note}", highlight=False, soft_wrap=True)
    if json:
        print_json([s.to_dict() for s in slos])
    else:
        console.print(
            f"applied {len(slos)} SLO(s): {', '.join(s.name for s in slos)}", highlight=False
        )


@slo_app.command("list")
def list_cmd(ctx: typer.Context, json: JsonOption = False) -> None:
    """List the stored SLOs; with --json, each with its figures now (attainment, budget left,
    burn rates) from the store's samples or the --metrics query API."""
    from slotune.collector.store import list_slos, open_store
    from slotune.collector.views import slo_figures

    with open_store(db_url(ctx)) as store:
        if json:
            print_json(slo_figures(store, metrics=metrics_client(ctx)))
            return
        slos = list_slos(store)
    table = Table()
    for column in ("name", "spec", "objective", "window"):
        table.add_column(column, no_wrap=True)
    table.add_column("selector")
    table.add_column("description")
    for s in slos:
        table.add_row(
            s.name,
            s.spec,
            _objective(s),
            f"{s.window_s / 86400:g}d",
            ", ".join(f"{k}={v}" for k, v in s.selector.as_dict().items()),
            s.description,
        )
    console.print(table)


def _objective(slo: SLO) -> str:
    from slotune.collector.slo import SLI

    if slo.sli is SLI.ERROR_RATE:
        return f"{slo.objective * 100:g}% ok"
    return f"{slo.objective * 100:g}% good"


@slo_app.command("delete")
def delete_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Name of the SLO to delete.")],
) -> None:
    """Delete one SLO by name, with its alert rules."""
    from slotune.collector.alerts import delete_slo_and_rules
    from slotune.collector.store import open_store

    with open_store(db_url(ctx)) as store:
        delete_slo_and_rules(store, name)
    console.print(f"deleted SLO {name}", highlight=False)


@slo_app.command("export")
def export_cmd(
    ctx: typer.Context,
    names: Annotated[list[str] | None, typer.Argument(help="SLO names (default: all).")] = None,
    format_: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            help="prometheus: a rule file; grafana: the SLO dashboard; grafana-fleet: the "
            "fleet dashboard (Grafana JSON, over the same PromQL).",
        ),
    ] = ExportFormat.PROMETHEUS,
    engine: Annotated[
        Engine, typer.Option(help="Whose metric names the rules use.")
    ] = DEFAULT_ENGINE,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write here instead of stdout.", callback=output_file),
    ] = None,
) -> None:
    """Write the stored SLOs as Prometheus recording and burn-rate alerting rules, or as
    Grafana dashboards."""
    from slotune.collector.alerts import export_grafana, export_prometheus, fleet_dashboard
    from slotune.collector.store import open_store

    with open_store(db_url(ctx)) as store:
        if format_ is ExportFormat.PROMETHEUS:
            exported = export_prometheus(store, names or [], engine.value)
            text, notes = exported.text, exported.notes
        elif format_ is ExportFormat.GRAFANA:
            text, notes = export_grafana(store, names or [], engine.value), ()
        else:
            text, notes = fleet_dashboard(engine.value), ()
    for note in notes:
        err_console.print(f"warning: {escape(note)}", highlight=False, soft_wrap=True)
    if output is None:
        sys.stdout.write(text)
    else:
        write_text(output, text, f"{format_.value} export")
        say(f"wrote {output}")


def register(app: typer.Typer) -> None:
    app.add_typer(slo_app, name="slo")
