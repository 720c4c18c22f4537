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

from slotune.collector.stored_results import store_result
from slotune.collector.vocabulary import DEFAULT_ENGINE
from slotune.ui.cli._common import (
    JsonOption,
    console,
    db_url,
    metrics_client,
    output_file,
    print_json,
    say,
)
from slotune.ui.cli._options import (
    ConcurrencyOption,
    EngineOption,
    GpuOption,
    ModelOption,
    NoStoreOption,
    NumRequestsOption,
    RateOption,
    SloOption,
    TimeScaleOption,
    TraceOption,
    WorkloadOption,
)

if TYPE_CHECKING:
    from slotune.collector.workload import Trace
    from slotune.tuner.diagnose import (
        Finding,
        SimDiagnosis,
        TimeSplit,
        TraceDiagnosis,
        TuneContext,
        WorkloadDiagnosis,
    )

diagnose_app = typer.Typer(
    help="Explain where GPU time goes (profiler traces, live metrics, the simulator) and "
    "whether the workload suits the cache and batching settings; findings name the engine "
    "parameters to change. See docs/diagnose.md.",
    no_args_is_help=True,
)

# A profiler trace or live metrics carry no replayable workload: the tune commands printed
# with their findings name one, so that they run as printed.
DEFAULT_TUNE_WORKLOAD = "azure-conv"
TuneWorkloadOption = Annotated[
    str,
    typer.Option(
        "--tune-workload",
        help="Bundled trace that the findings' tune commands replay (give your own traffic's).",
    ),
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
    top: Annotated[int, typer.Option(min=0, help="Kernels to list.")] = 15,
    html: Annotated[
        Path | None,
        typer.Option(
            help="Also write a standalone HTML report with a timeline.", callback=output_file
        ),
    ] = None,
    engine: EngineOption = DEFAULT_ENGINE,
    model: ModelOption = "llama-3.1-8b",
    gpu: GpuOption = "h100-sxm",
    tune_workload: TuneWorkloadOption = DEFAULT_TUNE_WORKLOAD,
    slo: SloOption = None,
    no_store: NoStoreOption = False,
    json_: JsonOption = False,
) -> None:
    """Where the GPU time of a PyTorch profiler (Kineto) trace goes, and what to change.

    Per profiler step and overall: compute, memcpy and communication (exposed or overlapped),
    idle; launch overhead; top kernels by category; findings.
    """
    from slotune.collector.errors import ConfigError
    from slotune.collector.textfile import write_text
    from slotune.tuner.diagnose import diagnose_trace, trace_html

    if memset not in ("compute", "separate"):
        raise ConfigError(f"--memset {memset!r}: use compute or separate")
    context = _tune_context(engine, model, gpu, tune_workload, slo)
    result = diagnose_trace(path, memset_separate=memset == "separate", top=top, context=context)
    if html is not None:
        write_text(html, trace_html(result), "HTML report")
    data = result.to_dict()
    if not no_store:
        inputs = {"path": str(path), "memset": memset}
        store_result(db_url(ctx), "trace", inputs, data, subject=str(path))
    if json_:
        print_json(data)
        return
    _render_trace(result)
    if html is not None:
        say(f"report: {html}")


@diagnose_app.command("live")
def live(
    ctx: typer.Context,
    target: Annotated[str | None, typer.Option(help="One engine target, by name.")] = None,
    pool: Annotated[str | None, typer.Option(help="Every engine target of a pool.")] = None,
    window: Annotated[str, typer.Option(help="Window ending at --end, e.g. 15m.")] = "15m",
    end: Annotated[
        float | None, typer.Option(help="Window end, epoch seconds (default: now).")
    ] = None,
    engine: EngineOption = DEFAULT_ENGINE,
    model: ModelOption = "llama-3.1-8b",
    gpu: GpuOption = "h100-sxm",
    tune_workload: TuneWorkloadOption = DEFAULT_TUNE_WORKLOAD,
    slo: SloOption = None,
    no_store: NoStoreOption = False,
    json_: JsonOption = False,
) -> None:
    """What the stored metrics say about each engine, and what to change.

    GPU split (DCGM or NVML), queue / prefill / decode time, KV usage, preemptions, prefix
    hits, and the findings they imply.
    """
    from slotune.collector.durations import parse_duration_s
    from slotune.collector.errors import ConfigError
    from slotune.collector.store import open_store
    from slotune.tuner.diagnose import diagnose_live

    if target is not None and pool is not None:
        raise ConfigError("give --target or --pool, not both")
    window_s = parse_duration_s(window, field_name="--window")
    with open_store(db_url(ctx)) as store:
        context = _tune_context(engine, model, gpu, tune_workload, slo)
        result = diagnose_live(
            store,
            target=target,
            pool=pool,
            window_s=window_s,
            end_ts=end,
            context=context,
            metrics=metrics_client(ctx),
        )
    data = result.to_dict()
    if not no_store:
        subject = target or (f"pool {pool}" if pool else "all engine targets")
        inputs = {"target": target, "pool": pool, "window_s": window_s, "end_ts": result.end_ts}
        store_result(db_url(ctx), "live", inputs, data, subject=subject)
    if json_:
        print_json(data)
        return
    for t in result.targets:
        grid = Table(title=f"{t.target} (node {t.node}, GPU: {', '.join(t.gpu_targets) or 'none'})")
        grid.add_column("figure")
        grid.add_column("value", justify="right")
        for key, value in t.figures.to_dict().items():
            grid.add_row(key, _fmt(value))
        console.print(grid)
        _render_findings(t.findings)


@diagnose_app.command(
    "sim", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def sim(
    ctx: typer.Context,
    workload_name: WorkloadOption = None,
    trace: TraceOption = None,
    rate: RateOption = None,
    concurrency: ConcurrencyOption = None,
    time_scale: TimeScaleOption = None,
    num_requests: NumRequestsOption = None,
    engine: EngineOption = DEFAULT_ENGINE,
    model: ModelOption = "llama-3.1-8b",
    gpu: GpuOption = "h100-sxm",
    slo: SloOption = None,
    no_store: NoStoreOption = False,
    json_: JsonOption = False,
) -> None:
    """A configuration explained through the simulator, in the words of a measured one.

    Engine flags take the engine's own names (e.g. --max-num-seqs 64 --enforce-eager), as
    `slotune sim` and `vllm serve` take them.
    """
    from slotune.tuner.diagnose import TuneContext, diagnose_simulated
    from slotune.tuner.sim import load_workload, parse_engine_flags

    config = parse_engine_flags(ctx.args, engine=engine, model=model, gpu=gpu)
    requests = load_workload(
        workload=workload_name,
        trace_file=trace,
        num_requests=num_requests,
        rate=rate,
        time_scale=time_scale,
    )
    source = ("--workload", workload_name) if workload_name else ("--trace", str(trace))
    context = TuneContext(
        ("--engine", engine, "--model", model, "--gpu", gpu, *source), engine, _slos(slo)
    )
    result = diagnose_simulated(config, requests, context=context, concurrency=concurrency)
    data = result.to_dict()
    if not no_store:
        inputs = {"args": list(ctx.args), "workload": requests.name, "config": result.config}
        subject = f"{model} on {gpu}: {requests.name}"
        store_result(db_url(ctx), "simulated", inputs, data, subject=subject)
    if json_:
        print_json(data)
        return
    _render_simulated(result)


def _tune_context(
    engine: str, model: str, gpu: str, workload: str, slo: list[str] | None
) -> TuneContext:
    """The flags of the findings' tune commands for a diagnosis that has no workload of its
    own (a profiler trace, live metrics): the command must run as printed."""
    from slotune.tuner.diagnose import TuneContext

    flags = ("--engine", engine, "--model", model, "--gpu", gpu, "--workload", workload)
    return TuneContext(flags, engine, _slos(slo))


def _slos(slo: list[str] | None) -> tuple[str, ...]:
    """The SLOs the findings' tune commands name: the ones given (checked), else the default."""
    from slotune.collector.slo import parse_slos
    from slotune.tuner.diagnose import DEFAULT_TUNE_SLOS

    parse_slos(slo or [])
    return tuple(slo) if slo else DEFAULT_TUNE_SLOS


def _render_simulated(result: SimDiagnosis) -> None:
    _render_splits(
        f"simulated: {result.config.get('model')} on {result.config.get('gpu')}, {result.workload}",
        (result.overall,),
    )
    grid = Table.grid(padding=(0, 2))
    grid.add_column()
    grid.add_column(justify="right")
    for key, value in result.figures.to_dict().items():
        grid.add_row(key, _fmt(value))
    console.print(grid)
    _render_findings(result.findings)


@diagnose_app.command("workload")
def workload(
    ctx: typer.Context,
    trace: Annotated[
        str | None,
        typer.Argument(help="Trace file (canonical JSONL, Azure CSV, Mooncake JSONL)."),
    ] = None,
    workload_name: WorkloadOption = None,
    run_id: Annotated[
        int | None, typer.Option("--run", help="A stored slotune bench run, by id.")
    ] = None,
    engine: EngineOption = DEFAULT_ENGINE,
    model: ModelOption = "llama-3.1-8b",
    gpu: GpuOption = "h100-sxm",
    sim_requests: Annotated[
        int,
        typer.Option(min=10, help="First requests the simulator replays per setting compared."),
    ] = 1000,
    time_scale: TimeScaleOption = None,
    slo: SloOption = None,
    no_store: NoStoreOption = False,
    json_: JsonOption = False,
) -> None:
    """What the traffic looks like and which cache and batching settings suit it.

    Lengths, burstiness, prefix reuse; prefix caching, chunked prefill and the token budget
    simulated both ways; whether a long/short split is warranted.
    """
    from slotune.tuner.diagnose import SimTarget, TuneContext, diagnose_workload

    requests, flags = _workload_input(ctx, trace, workload_name, run_id)
    context = TuneContext(
        ("--engine", engine, "--model", model, "--gpu", gpu, *flags), engine, _slos(slo)
    )
    result = diagnose_workload(
        requests,
        target=SimTarget(engine, model, gpu),
        num_sim_requests=sim_requests,
        time_scale=time_scale,
        context=context,
    )
    data = result.to_dict()
    if not no_store:
        inputs = {
            "source": result.source,
            "engine": engine,
            "model": model,
            "gpu": gpu,
            "time_scale": time_scale,
        }
        store_result(db_url(ctx), "workload", inputs, data, subject=result.source)
    if json_:
        print_json(data)
        return
    _render_workload(result)


def _workload_input(
    ctx: typer.Context, trace: str | None, workload_name: str | None, run_id: int | None
) -> tuple[Trace, tuple[str, ...]]:
    """The requests to diagnose and the tune flags that name them."""
    from slotune.collector.errors import ConfigError
    from slotune.collector.store import load_bench_run, open_store
    from slotune.collector.workload import load_trace, named_workload
    from slotune.tuner.diagnose import bench_run_trace

    given = [x for x in (trace, workload_name, run_id) if x is not None]
    if len(given) != 1:
        raise ConfigError("give exactly one of TRACE (a file), --workload NAME or --run ID")
    if run_id is not None:
        with open_store(db_url(ctx)) as store:
            run = load_bench_run(store, run_id)
        requests = bench_run_trace(run)
        return requests, _replay_flags(run.meta.workload)
    if workload_name is not None:
        return named_workload(workload_name), ("--workload", workload_name)
    assert trace is not None
    return load_trace(trace), ("--trace", trace)


def _replay_flags(workload_name: str) -> tuple[str, ...]:
    from slotune.collector.workload import NAMED_WORKLOADS

    return ("--workload", workload_name) if workload_name in NAMED_WORKLOADS else ()


def _render_workload(result: WorkloadDiagnosis) -> None:
    flow = result.traffic
    grid = Table(title=f"workload: {result.source}")
    grid.add_column("")
    grid.add_column("mean", justify="right")
    for col in ("p50", "p90", "p99", "max"):
        grid.add_column(col, justify="right")
    for label, lengths in (
        ("input tokens", flow.input_tokens),
        ("output tokens", flow.output_tokens),
    ):
        grid.add_row(
            label,
            *(
                f"{v:,.0f}"
                for v in (lengths.mean, lengths.p50, lengths.p90, lengths.p99, lengths.max)
            ),
        )
    console.print(grid)
    facts = Table.grid(padding=(0, 2))
    facts.add_column()
    facts.add_column(justify="right")
    rows = [
        (
            "requests / duration / mean rate",
            f"{flow.num_requests:,} / {flow.duration_s:,.0f} s / {flow.mean_rate:.2f} req/s",
        ),
        ("input-output length correlation (Spearman)", _fmt(flow.length_correlation)),
        (
            "inter-arrival CV / peak-to-mean 1 min / 1 h",
            f"{_fmt(flow.interarrival_cv)} / {_fmt(flow.peak_to_mean_1m)} / {_fmt(flow.peak_to_mean_1h)}",
        ),
    ]
    p = result.prefix
    if p is None:
        rows.append(("prefix reuse", "no prefix hashes in the trace"))
    else:
        rows += [
            (
                "reused prompt blocks / tokens",
                f"{p.reused_block_share:.1%} / {p.reused_token_share:.1%}",
            ),
            (
                "multi-turn / fixed system prompt share",
                f"{p.multi_turn_share:.1%} / {p.system_prompt_share:.1%}",
            ),
            ("KV tokens for 90 % of the reuse (LRU)", f"{p.working_set_tokens:,}"),
        ]
    for label, value in rows:
        facts.add_row(label, value)
    console.print(facts)
    runs = Table(
        title=f"simulated: {result.target.model} on {result.target.gpu}, "
        f"first {result.num_sim_requests:,} requests"
    )
    runs.add_column("setting", no_wrap=True)
    for col in ("TTFT p50 ms", "TTFT p99 ms", "ITL p99 ms", "prefix hits", "preemptions"):
        runs.add_column(col, justify="right")
    for r in result.runs:
        runs.add_row(
            r.label,
            _fmt(r.ttft_p50_ms),
            _fmt(r.ttft_p99_ms),
            _fmt(r.itl_p99_ms),
            f"{r.prefix_hit_rate:.1%}",
            str(r.preemptions),
        )
    console.print(runs)
    _render_findings(result.findings)


def _ms(value: float) -> str:
    return f"{value:,.3f}"


def _render_splits(title: str, splits: tuple[TimeSplit, ...]) -> None:
    table = Table(title=title)
    columns = ("window", "total ms", "compute", "exposed memcpy", "exposed comm", "idle")
    for col in columns:
        if col == "window":
            table.add_column(col, no_wrap=True)
        else:
            table.add_column(col, justify="right")
    for split in splits:
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


def _render_trace(result: TraceDiagnosis) -> None:
    _render_splits(f"GPU time split: {result.source}", (result.overall, *result.windows))
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
    for col in ("kernel", "category", "count", "total ms", "busy share", "TFLOP/s"):
        kernels.add_column(col, justify="left" if col in ("kernel", "category") else "right")
    for k in result.kernels:
        name = k.name if len(k.name) <= 70 else k.name[:67] + "..."
        kernels.add_row(
            name,
            k.category.value,
            f"{k.count:,}",
            _ms(k.total_ms),
            f"{k.busy_share:.1%}",
            _fmt(k.tflop_per_s),
        )
    console.print(kernels)
    _render_findings(result.findings)


_SEVERITY_STYLE = {"ok": "green", "info": "blue", "warning": "yellow", "critical": "bold red"}


def _render_findings(findings: tuple[Finding, ...]) -> None:
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
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)
