"""The ``slotune`` command line.

Every module in this package that defines ``register(app)`` adds its commands; the root
holds only the options shared by all of them (``--db``, ``--metrics``, ``--version``) and turns a
``SlotuneError`` raised by any command into one ``error:`` line and exit code 1.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Annotated

import typer

from slotune.ui.cli._common import SlotuneGroup, State, version_text

app = typer.Typer(
    name="slotune",
    cls=SlotuneGroup,
    help="Make LLM serving fleets (vLLM, TensorRT-LLM, SGLang) meet their latency SLOs at the "
    "lowest cost: measure, declare SLOs, tune engine parameters.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            envvar="SLOTUNE_DB",
            help="Database URL: sqlite:///path.db or postgresql+psycopg://user@host/db. "
            "Default: a SQLite file in the user's data directory.",
            show_default=False,
        ),
    ] = None,
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            envvar="SLOTUNE_METRICS",
            help="Read metrics from a Prometheus-compatible query API (http://host:9090, or a "
            "Thanos, Mimir or VictoriaMetrics base URL) instead of the store's samples.",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """slotune: SLO-driven tuning and monitoring for LLM serving engines."""
    ctx.obj = State(db_url=db, metrics_url=metrics)


def _register_commands() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_commands()


def main() -> None:
    """The ``slotune`` entry point: errors are translated once, by :class:`SlotuneGroup`."""
    app()
