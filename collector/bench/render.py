"""Rich output: the live progress display, the final table and the comparison table.

The live display is redrawn from the run's event loop twice a second; recording a request
only appends to lists, so the display costs the measurement nothing per chunk.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from slotune.collector.bench.compare import ComparisonRow
from slotune.collector.bench.maxrate import MaxRateResult
from slotune.collector.figures import figure
from slotune.collector.records import RequestRecord
from slotune.collector.slo import SLO
from slotune.collector.store import BenchRunInfo


class LiveProgress:
    """Request count, live TTFT/ITL percentiles and errors while a run goes."""

    def __init__(self, slos: Sequence[SLO] = (), console: Console | None = None) -> None:
        self._console = console or Console(stderr=True)
        self._slos = slos
        self._ttft_s: list[float] = []
        self._itl_s: list[float] = []
        self._errors = 0
        self._good = 0
        self._progress = Progress(
            TextColumn("[bold]bench"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self._console,
            auto_refresh=False,
        )
        self._task = self._progress.add_task("requests", total=None)
        self._live: Live | None = None
        self._started_s = 0.0
        self._duration_s: float | None = None

    def start(self, num_measured: int | None, duration_s: float | None) -> None:
        self._progress.update(self._task, total=num_measured)
        self._duration_s = duration_s
        self._started_s = time.perf_counter()
        self._live = Live(self._render(), console=self._console, auto_refresh=False, transient=True)
        self._live.start()

    def record(self, record: RequestRecord) -> None:
        self._progress.advance(self._task)
        if not record.is_ok:
            self._errors += 1
            return
        if record.ttft_s is not None:
            self._ttft_s.append(record.ttft_s)
        self._itl_s.extend(g for g, _ in record.itl_gaps_s())
        if all(s.is_good(record) for s in self._slos):
            self._good += 1

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render(), refresh=True)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _render(self) -> RenderableType:
        parts = [
            f"TTFT {_pcts(self._ttft_s)}",
            f"ITL {_pcts(self._itl_s)}",
            f"errors {self._errors}",
        ]
        if self._slos:
            parts.append(f"good {self._good}")
        if self._duration_s is not None:
            left = self._duration_s - (time.perf_counter() - self._started_s)
            parts.append(f"window {max(left, 0):.0f} s left")
        return Group(self._progress, Text("  ".join(parts)))


def _pcts(values_s: list[float]) -> str:
    if not values_s:
        return "-"
    p50, p99 = np.percentile(values_s, [50, 99]) * 1000.0
    return f"p50 {p50:.1f} ms p99 {p99:.1f} ms"


def _ms(x: Any) -> str:
    return figure(x)


def _num(x: Any, unit: str = "") -> str:
    return figure(x, unit) if x is None or isinstance(x, int | float) else f"{x}{unit}"


def summary_table(summary: Mapping[str, Any], title: str = "") -> RenderableType:
    """The final table of one run: latency percentiles, throughputs, goodput, SLOs, errors."""
    lat = Table(title=escape(title) or None, title_justify="left")  # run names are user text
    lat.add_column("metric (ms)")
    for stat in ("mean", "p50", "p90", "p95", "p99", "p99.9", "count"):
        lat.add_column(stat, justify="right")
    for name in ("ttft", "itl", "tpot", "e2e"):
        block = summary.get(f"{name}_ms") or {}
        lat.add_row(
            name,
            *(_ms(block.get(s)) for s in ("mean", "p50", "p90", "p95", "p99", "p99.9")),
            figure(block.get("count", 0)),
        )
    totals = Table.grid(padding=(0, 2))
    totals.add_column()
    totals.add_column(justify="right")
    rows = [
        (
            "measured requests (completed / measured)",
            f"{summary.get('num_completed')} / {summary.get('num_requests')}",
        ),
    ]
    if summary.get("num_sent") is not None:
        cancelled = summary.get("num_cooldown_cancelled") or 0
        rows.append(
            (
                "requests sent (warm-up + measured + cool-down)",
                f"{summary['num_sent']} ({summary.get('num_warmup', 0)} + "
                f"{summary.get('num_requests')} + {summary.get('num_cooldown', 0)}"
                + (f", {cancelled} cancelled at the end" if cancelled else "")
                + ")",
            )
        )
    rows += [
        ("target rate (req/s)", _num(summary.get("target_rate"))),
        ("offered rate, as scheduled (req/s)", _num(summary.get("offered_rate"))),
        ("achieved send rate (req/s)", _num(summary.get("achieved_rate"))),
        ("request throughput (req/s)", _num(summary.get("request_throughput"))),
        ("output tokens/s", _num(summary.get("output_token_throughput"))),
        ("input tokens/s", _num(summary.get("input_token_throughput"))),
        ("goodput (req/s)", _num(summary.get("goodput"))),
        ("duration (s)", _num(summary.get("duration_s"))),
    ]
    lag = summary.get("send_lag_ms")
    if isinstance(lag, Mapping):
        rows.append(
            (
                "send lag p50 / p99 / max (ms)",
                f"{lag['p50']:.2f} / {lag['p99']:.2f} / {lag['max']:.2f}",
            )
        )
    errors = summary.get("errors_by_kind") or {}
    rows.append(("errors", ", ".join(f"{k} {v}" for k, v in errors.items()) or "none"))
    if summary.get("client_token_mismatches"):
        rows.append(
            ("client token re-count != usage", f"{summary['client_token_mismatches']} requests")
        )
    for label, value in rows:
        totals.add_row(label, value)
    parts: list[RenderableType] = [lat, totals]
    if summary.get("slo_attainment"):
        parts.append(slo_table(summary["slo_attainment"]))
    return Group(*parts)


def slo_table(attainment: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="SLOs", title_justify="left")
    for col in ("slo", "value", "attainment", "objective", "met"):
        table.add_column(col, justify="left" if col == "slo" else "right")
    for a in attainment:
        value = a.get("value")
        shown = (
            "-"
            if value is None
            else (f"{value:.2f} ms" if a.get("unit") == "ms" else f"{value:.2%}")
        )
        table.add_row(
            a["spec"],
            shown,
            f"{a['attainment']:.2%}",
            f"{a['objective']:.2%}",
            "[green]yes[/]" if a["met"] else "[red]no[/]",
        )
    return table


def compare_table(rows: Sequence[ComparisonRow], label_a: str, label_b: str) -> Table:
    """Two runs side by side with the relative change."""
    table = Table(title="bench compare", title_justify="left")
    table.add_column("metric")
    table.add_column(escape(label_a), justify="right")
    table.add_column(escape(label_b), justify="right")
    table.add_column("change", justify="right")
    for r in rows:
        change = "-" if r.change is None else f"{r.change:+.1%}"
        table.add_row(r.metric, _num(r.a), _num(r.b), change)
    return table


def max_rate_table(result: MaxRateResult) -> Table:
    """The max-rate curve: rate -> percentiles and SLO attainment."""
    table = Table(title=f"max rate {result.max_rate:.3g} req/s", title_justify="left")
    for col in (
        "rate",
        "ttft p99 ms",
        "itl p99 ms",
        "tpot p99 ms",
        "e2e p99 ms",
        "goodput",
        "attainment",
        "all met",
    ):
        table.add_column(col, justify="right")
    for p in result.curve:
        s = p.summary
        att = ", ".join(f"{k} {v:.1%}" for k, v in p.attainment.items())
        table.add_row(
            f"{p.rate:.3g}",
            *(_ms((s.get(m) or {}).get("p99")) for m in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")),
            _num(s.get("goodput")),
            att,
            "[green]yes[/]" if p.all_met else "[red]no[/]",
        )
    return table


def runs_table(infos: Sequence[BenchRunInfo]) -> Table:
    """Stored runs: id, name, model, workload, when, size, headline figures."""
    table = Table(title="benchmark runs", title_justify="left")
    for col in (
        "id",
        "name",
        "model",
        "workload",
        "started",
        "requests",
        "ttft p99 ms",
        "itl p99 ms",
        "req/s",
        "goodput",
        "slos met",
    ):
        table.add_column(col, justify="right" if col in ("id", "requests") else "left")
    for i in infos:
        s = i.summary
        started = datetime.fromtimestamp(i.meta.started_at).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(
            str(i.run_id),
            escape(i.meta.name),  # names, models and workloads are user text, not markup
            escape(i.meta.model),
            escape(i.meta.workload),
            started,
            str(i.num_requests),
            _ms((s.get("ttft_ms") or {}).get("p99")),
            _ms((s.get("itl_ms") or {}).get("p99")),
            _num(s.get("request_throughput")),
            _num(s.get("goodput")),
            "-" if not s.get("slo_attainment") else ("yes" if s.get("slos_met") else "no"),
        )
    return table
