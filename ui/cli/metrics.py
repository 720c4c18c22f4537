"""``slotune metrics summary``: per-target latency, throughput, cache and GPU figures."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from collector.agent import TargetMetricsSummary, summarize_metrics
from collector.slo import parse_duration_s
from collector.store import open_store
from ui.cli._common import JsonOption, console, db_url, print_json, run

metrics_app = typer.Typer(help="Read back what agents stored (see docs/agent.md).",
                          no_args_is_help=True)


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
    window_s = run(parse_duration_s, window, field_name="--window")
    with run(open_store, db_url(ctx)) as store:
        summaries = run(summarize_metrics, store, target=target, window_s=window_s)
    if json:
        print_json([s.to_dict() for s in summaries])
        return
    table = Table("target", "up", "TTFT p50/p99 ms", "ITL p50/p99 ms", "E2E p50/p99 ms",
                  "req/s", "out tok/s", "waiting", "KV", "prefix hit", "VRAM GiB", "GPU", "W")
    for s in summaries:
        table.add_row(s.target, _up(s), _pair(s.ttft_ms), _pair(s.itl_ms), _pair(s.e2e_ms),
                      _num(s.request_throughput), _num(s.output_token_throughput),
                      _num(s.requests_waiting), _pct(s.kv_usage), _pct(s.prefix_hit_rate),
                      _gib(s.vram_used_bytes, s.vram_total_bytes), _pct(s.gpu_utilization),
                      _num(s.power_watts))
    console.print(table)


def _up(s: TargetMetricsSummary) -> str:
    return "?" if s.is_up is None else ("yes" if s.is_up else "no")


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def _pair(q: dict[str, float | None]) -> str:
    return f"{_num(q.get('p50'))}/{_num(q.get('p99'))}"


def _gib(used: float | None, total: float | None) -> str:
    if used is None:
        return "-"
    gib = 1024.0 ** 3
    return f"{used / gib:.1f}" + ("" if total is None else f"/{total / gib:.1f}")
