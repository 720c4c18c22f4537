"""``slotune diagnose trace|live|workload``: where GPU time goes and which knob to turn.

Each command is one library call (``slotune.tuner.diagnose``), storing the result in the
``diagnosis`` table, then rendering it. The analysis modules are imported inside the
commands (numpy, the simulator, the store are not for ``slotune --help``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from slotune.ui.cli._common import JsonOption, cli_errors, console, db_url, print_json

if TYPE_CHECKING:
    from slotune.tuner.diagnose import Finding, TraceDiagnosis

diagnose_app = typer.Typer(
    help="Explain where GPU time goes (profiler traces, live metrics, the simulator) and "
    "whether the workload suits the cache and batching settings; findings name the engine "
    "parameters to change. See docs/diagnose.md.",
    no_args_is_help=True,
)

NoStoreOption = Annotated[
    bool, typer.Option("--no-store", help="Do not save the result in the diagnosis table.")
]


def register(app: typer.Typer) -> None:
    app.add_typer(diagnose_app, name="diagnose")


@diagnose_app.command("trace")
def trace(
    ctx: typer.Context,
    path: Annotated[
        Path, typer.Argument(help="Profiler trace (.json, .json.gz) or a directory of ranks.")
    ],
    memset: Annotated[
        str, typer.Option(help="Count memset as 'compute' (as TraceLens) or 'separate'.")
    ] = "compute",
    top: Annotated[int, typer.Option(help="Kernels to list.")] = 15,
    html: Annotated[
        Path | None, typer.Option(help="Also write a standalone HTML report with a timeline.")
    ] = None,
    no_store: NoStoreOption = False,
    json_: JsonOption = False,
) -> None:
    """Split GPU time of a PyTorch profiler (Kineto) trace: compute / memcpy / communication /
    idle per profiler step, launch overhead, top kernels, and what to change."""
    from slotune.collector.errors import ConfigError
    from slotune.tuner.diagnose import diagnose_trace, trace_html

    with cli_errors():
        if memset not in ("compute", "separate"):
            raise ConfigError(f"--memset {memset!r}: use compute or separate")
        result = diagnose_trace(path, memset_separate=memset == "separate", top=top)
        if html is not None:
            html.write_text(trace_html(result), encoding="utf-8")
        data = result.to_dict()
        if not no_store:
            _store(ctx, "trace", {"path": str(path), "memset": memset}, data, str(path))
    if json_:
        print_json(data)
        return
    _render_trace(result)
    if html is not None:
        console.print(f"report: {html}")


def _store(
    ctx: typer.Context, kind: str, inputs: dict[str, Any], result: dict[str, Any], subject: str
) -> None:
    from slotune.collector.store import open_store, save_diagnosis

    with open_store(db_url(ctx)) as store:
        save_diagnosis(store, kind, inputs, result, subject=subject[-200:])


def _ms(value: float) -> str:
    return f"{value:,.3f}"


def _render_trace(result: TraceDiagnosis) -> None:
    table = Table(title=f"GPU time split: {result.source}")
    columns = ("window", "total ms", "compute", "exposed memcpy", "exposed comm", "idle")
    for col in columns:
        table.add_column(col, justify="left" if col == "window" else "right")
    for split in (result.overall, *result.windows):
        pct = split.share
        table.add_row(
            split.name,
            _ms(split.total_ms),
            f"{_ms(split.compute_ms)} ({pct(split.compute_ms):.1%})",
            f"{_ms(split.exposed_memcpy_ms)} ({pct(split.exposed_memcpy_ms):.1%})",
            f"{_ms(split.exposed_comm_ms)} ({pct(split.exposed_comm_ms):.1%})",
            f"{_ms(split.idle_ms)} ({pct(split.idle_ms):.1%})",
        )
    console.print(table)
    launch = result.launch
    delay = launch.launch_delay
    grid = Table.grid(padding=(0, 2))
    grid.add_column()
    grid.add_column(justify="right")
    for label, value in (
        (
            "kernels / kernel launches / graph launches",
            f"{launch.num_kernels:,} / "
            f"{launch.num_kernel_launches:,} / {launch.num_graph_launches:,}",
        ),
        ("CPU time in launch calls (ms)", _ms(launch.launch_cpu_ms)),
        (
            "launch delay p50 / p90 / p99 (µs)",
            " / ".join(
                "-" if v is None else f"{v:,.1f}"
                for v in (delay.p50_us, delay.p90_us, delay.p99_us)
            ),
        ),
        (
            "kernels < 10 µs (share of busy)",
            f"{launch.num_short_kernels:,} ({launch.short_kernel_busy_share:.1%})",
        ),
        ("GPU idle while the CPU launches/syncs (ms)", _ms(result.overall.host_idle_ms)),
    ):
        grid.add_row(label, value)
    console.print(grid)
    kernels = Table(title="top kernels")
    for col in ("kernel", "category", "count", "total ms", "busy share"):
        kernels.add_column(col, justify="left" if col in ("kernel", "category") else "right")
    for k in result.kernels:
        name = k.name if len(k.name) <= 70 else k.name[:67] + "..."
        kernels.add_row(
            name, k.category.value, f"{k.count:,}", _ms(k.total_ms), f"{k.busy_share:.1%}"
        )
    console.print(kernels)
    _render_findings(result.findings)


_SEVERITY_STYLE = {"ok": "green", "info": "blue", "warning": "yellow", "critical": "bold red"}


def _render_findings(findings: tuple[Finding, ...] | list[Finding]) -> None:
    if not findings:
        console.print("no findings")
    for f in findings:
        style = _SEVERITY_STYLE.get(f.severity.value, "")
        console.print(
            f"[{style}]{f.severity.value}[/] [bold]{f.code}[/]: {f.title}", highlight=False
        )
        evidence = ", ".join(f"{k}={_fmt(v)}" for k, v in f.evidence.items())
        console.print(f"  evidence: {evidence}", highlight=False, soft_wrap=True)
        console.print(f"  remedy: {f.remedy}", highlight=False)
        if f.parameters:
            console.print(f"  parameters: {', '.join(f.parameters)}", highlight=False)
        if f.tune_command:
            console.print(f"  tune: {f.tune_command}", highlight=False, soft_wrap=True)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
