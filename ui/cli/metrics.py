"""``slotune metrics summary``: per-target latency, throughput, cache and GPU figures."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from slotune.collector.figures import figure
from slotune.ui.cli._common import JsonOption, console, db_url, metrics_client, print_json

if TYPE_CHECKING:
    from slotune.collector.metrics import TargetMetricsSummary

# Library modules are imported inside the command: building the CLI (every slotune run, shell
# completion) must not load the store, numpy or aiohttp.

metrics_app = typer.Typer(
    help="Read back what agents stored (see docs/agent.md).", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(metrics_app, name="metrics")


@metrics_app.command("summary")
def summary_cmd(
    ctx: typer.Context,
    target: Annotated[str | None, typer.Option(help="One target's name.")] = None,
    window: Annotated[str, typer.Option(help="Window ending now, e.g. 5m.")] = "5m",
    json: JsonOption = False,
) -> None:
    """Percentiles from bucket deltas, throughput, queue, KV, prefix hits, VRAM, power."""
    from slotune.collector.durations import parse_duration_s
    from slotune.collector.metrics import summarize_metrics
    from slotune.collector.store import open_store

    window_s = parse_duration_s(window, field_name="--window")
    with open_store(db_url(ctx)) as store:
        summaries = summarize_metrics(
            store, target=target, window_s=window_s, metrics=metrics_client(ctx)
        )
    if json:
        print_json([s.to_dict() for s in summaries])
        return
    table = Table("", *(escape(s.target) for s in summaries))  # user text, not markup
    for label, render in _ROWS:
        table.add_row(label, *(render(s) for s in summaries))
    console.print(table)


def _quantiles(q: dict[str, float | None]) -> str:
    return "/".join(_num(q.get(k)) for k in ("p50", "p90", "p99"))


_ROWS: tuple[tuple[str, Callable[[TargetMetricsSummary], str]], ...] = (
    ("up", lambda s: _up(s)),
    ("TTFT p50/p90/p99 ms", lambda s: _quantiles(s.ttft_ms)),
    ("ITL p50/p90/p99 ms", lambda s: _quantiles(s.itl_ms)),
    ("TPOT p50/p90/p99 ms", lambda s: _quantiles(s.tpot_ms)),
    ("E2E p50/p90/p99 ms", lambda s: _quantiles(s.e2e_ms)),
    ("requests/s", lambda s: _num(s.request_throughput)),
    ("output tokens/s", lambda s: _num(s.output_token_throughput)),
    ("input tokens/s", lambda s: _num(s.input_token_throughput)),
    ("running / waiting", lambda s: f"{_num(s.requests_running)} / {_num(s.requests_waiting)}"),
    ("KV usage", lambda s: _pct(s.kv_usage)),
    ("prefix hit rate", lambda s: _pct(s.prefix_hit_rate)),
    ("preemptions/s", lambda s: _num(s.preemption_rate)),
    ("VRAM used/total GiB", lambda s: _gib(s.vram_used_bytes, s.vram_total_bytes)),
    ("GPU utilisation", lambda s: _pct(s.gpu_utilization)),
    ("power W", lambda s: _num(s.power_watts)),
)


def _up(s: TargetMetricsSummary) -> str:
    return "?" if s.is_up is None else ("yes" if s.is_up else "no")


def _num(v: float | None) -> str:
    return figure(v)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def _gib(used: float | None, total: float | None) -> str:
    if used is None:
        return "-"
    gib = 1024.0**3
    return f"{used / gib:.1f}" + ("" if total is None else f"/{total / gib:.1f}")
