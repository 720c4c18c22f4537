"""State, output and error handling shared by every command."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from slotune.collector.errors import SlotuneError
from slotune.collector.textfile import check_output

if TYPE_CHECKING:
    from slotune.collector.metrics import PromClient

console = Console()
err_console = Console(stderr=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]


@dataclass
class State:
    """What the root command parsed, handed to every subcommand through ``ctx.obj``."""

    db_url: str | None = None
    metrics_url: str | None = None


def version_text() -> str:
    try:
        return f"slotune {version('slotune')}"
    except PackageNotFoundError:
        return "slotune (not installed)"


def db_url(ctx: typer.Context) -> str | None:
    """The ``--db`` URL given to the root command (or ``SLOTUNE_DB``), None for the default."""
    root = ctx.find_root()
    state = root.obj if isinstance(root.obj, State) else None
    return state.db_url if state else None


def metrics_url(ctx: typer.Context) -> str | None:
    """The ``--metrics`` URL (or ``SLOTUNE_METRICS``), None to read the store's samples."""
    root = ctx.find_root()
    state = root.obj if isinstance(root.obj, State) else None
    return state.metrics_url if state else None


def metrics_client(ctx: typer.Context) -> PromClient | None:
    """The query API of ``--metrics`` (closed with the command), None to read the store."""
    from slotune.collector.metrics import open_metrics

    client = open_metrics(metrics_url(ctx))
    if client is not None:
        ctx.find_root().call_on_close(client.close)
    return client


def say(text: str, *, err: bool = False) -> None:
    """Print one plain line that holds user text (paths, names, URLs).

    Never read as Rich markup, so a path such as ``[/x]`` prints as it is; inside markup or a
    table cell, escape user text with :func:`rich.markup.escape` instead.
    """
    (err_console if err else console).print(text, markup=False, highlight=False, soft_wrap=True)


def output_file(path: Path | None) -> Path | None:
    """Option callback of every file the CLI writes: refuse, before any work, an output that
    can never be written (a FIFO, a device, a directory, a missing or read-only directory)."""
    if path is not None:
        check_output(path, "output")
    return path


def fail(code: int, message: str) -> NoReturn:
    """Print one red ``error:`` line on stderr and exit with ``code``.

    The message is user text (paths, URLs, names): it is escaped, never read as Rich markup.
    """
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=code)


class SlotuneGroup(TyperGroup):
    """The root ``slotune`` group: the one place a slotune error becomes an exit code.

    Every command runs inside :meth:`invoke`, so a :class:`SlotuneError` raised anywhere below
    prints one red ``error:`` line on stderr and exits 1; Ctrl-C prints ``interrupted`` and
    exits 130. Other exceptions are bugs and keep their traceback.
    """

    # Typer hands its own Context; the base class names the click it vendors (private).
    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except SlotuneError as e:
            fail(1, str(e))
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(code=130) from None


def print_json(data: Any) -> None:
    """Write JSON to stdout (no Rich markup, so it pipes into jq).

    A value that is not a finite number (NaN, infinity) is written as ``null``: JSON has no
    other spelling for it, and a bare ``NaN`` breaks every strict reader.
    """
    text = json.dumps(_finite(data), indent=2, default=str, allow_nan=False)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data
