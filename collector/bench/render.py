"""Rich output: the live progress display, the final table and the comparison table.

The live display is redrawn from the run's event loop twice a second; recording a request
only appends to lists, so the display costs the measurement nothing per chunk.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

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
from slotune.collector.slo import SLI, SLO, Attainment
from slotune.collector.store import BenchRunInfo
from slotune.collector.summary import PERCENTILES, Summary


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


def summary_table(summary: Summary, title: str = "") -> RenderableType:
    """The final table of one run: latency percentiles, throughputs, goodput, SLOs, errors."""
    lat = Table(title=escape(title) or None, title_justify="left")  # run names are user text
    lat.add_column("metric (ms)")
    for stat in ("mean", "p50", "p90", "p95", "p99", "p99.9", "count"):
        lat.add_column(stat, justify="right")
    for name, d in (
        ("ttft", summary.ttft_ms),
        ("itl", summary.itl_ms),
        ("tpot", summary.tpot_ms),
        ("e2e", summary.e2e_ms),
    ):
        lat.add_row(
            name, figure(d.mean), *(figure(d.percentiles[p]) for p in PERCENTILES), figure(d.count)
        )
    totals = Table.grid(padding=(0, 2))
    totals.add_column()
    totals.add_column(justify="right")
    for label, value in _totals(summary):
        totals.add_row(label, value)
    parts: list[RenderableType] = [lat, totals]
    if summary.slo_attainment:
        parts.append(slo_table(summary.slo_attainment))
    return Group(*parts)


def _totals(summary: Summary) -> list[tuple[str, str]]:
    load = summary.load
    rows = [
        (
            "measured requests (completed / measured)",
            f"{summary.num_completed} / {summary.num_requests}",
        ),
    ]
    if load is not None:
        cancelled = load.num_cooldown_cancelled
        rows.append(
            (
                "requests sent (warm-up + measured + cool-down)",
                f"{load.num_sent} ({load.num_warmup} + "
                f"{summary.num_requests} + {load.num_cooldown}"
                + (f", {cancelled} cancelled at the end" if cancelled else "")
                + ")",
            )
        )
    rows += [
        ("target rate (req/s)", figure(None if load is None else load.target_rate)),
        ("offered rate, as scheduled (req/s)", figure(None if load is None else load.offered_rate)),
        ("achieved send rate (req/s)", figure(None if load is None else load.achieved_rate)),
        ("request throughput (req/s)", figure(summary.request_throughput)),
        ("output tokens/s", figure(summary.output_token_throughput)),
        ("input tokens/s", figure(summary.input_token_throughput)),
        ("goodput (req/s)", figure(summary.goodput)),
        ("duration (s)", figure(summary.duration_s)),
    ]
    lag = None if load is None else load.send_lag_ms
    if lag is not None:
        rows.append(
            ("send lag p50 / p99 / max (ms)", f"{lag.p50:.2f} / {lag.p99:.2f} / {lag.max:.2f}")
        )
    errors = summary.errors_by_kind
    rows.append(("errors", ", ".join(f"{k} {v}" for k, v in errors.items()) or "none"))
    if load is not None and load.client_token_mismatches:
        rows.append(("client token re-count != usage", f"{load.client_token_mismatches} requests"))
    return rows


def slo_table(attainment: Sequence[Attainment]) -> Table:
    table = Table(title="SLOs", title_justify="left")
    for col in ("slo", "value", "attainment", "objective", "met"):
        table.add_column(col, justify="left" if col == "slo" else "right")
    for a in attainment:
        value = a.value
        shown = (
            "-"
            if value is None
            else (f"{value:.2%}" if a.slo.sli is SLI.ERROR_RATE else f"{value * 1000:.2f} ms")
        )
        table.add_row(
            a.slo.spec,
            shown,
            f"{a.attainment:.2%}",
            f"{a.slo.objective:.2%}",
            "[green]yes[/]" if a.is_met else "[red]no[/]",
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
        table.add_row(r.metric, figure(r.a), figure(r.b), change)
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
            *(figure(d.p99) for d in (s.ttft_ms, s.itl_ms, s.tpot_ms, s.e2e_ms)),
            figure(s.goodput),
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
        s = Summary.from_dict(i.summary)
        started = datetime.fromtimestamp(i.meta.started_at).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(
            str(i.run_id),
            escape(i.meta.name),  # names, models and workloads are user text, not markup
            escape(i.meta.model),
            escape(i.meta.workload),
            started,
            str(i.num_requests),
            figure(s.ttft_ms.p99),
            figure(s.itl_ms.p99),
            figure(s.request_throughput),
            figure(s.goodput),
            "-" if not s.slo_attainment else ("yes" if s.all_slos_met else "no"),
        )
    return table
