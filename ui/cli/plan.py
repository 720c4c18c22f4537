"""``slotune plan capacity|autoscale``: size pools for a trace's peak; replay autoscaling."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from slotune.collector.vocabulary import DEFAULT_ENGINE
from slotune.ui.cli._common import JsonOption, console, db_url, err_console, print_json
from slotune.ui.cli._fleet import (
    NoBreakerOption,
    OutageOption,
    PoolOption,
    RouteConfigOption,
    fleet_inputs,
    health_inputs,
)
from slotune.ui.cli._options import (
    EngineOption,
    InputLenOption,
    MaybeGpuOption,
    MaybeModelOption,
    NoStoreOption,
    NumRequestsOption,
    OutputLenOption,
    RateOption,
    SeedOption,
    SloOption,
    TimeScaleOption,
    TraceOption,
    WorkloadOption,
)

if TYPE_CHECKING:
    from slotune.collector.plans import AutoscalePlan, CapacityPlan, SheddingPlan
    from slotune.tuner.fleet import ReplayProgress

plan_app = typer.Typer(
    help="Plan a fleet: replicas and GPUs per pool for a trace's peak under the SLOs, and "
    "autoscaling / load-shedding policies replayed on the trace. See docs/fleet.md.",
    no_args_is_help=True,
)

GpuPriceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--gpu-price",
        help="ID=USD per GPU-hour, repeatable (defaults: the bundled catalog, dated).",
    ),
]


def register(app: typer.Typer) -> None:
    app.add_typer(plan_app, name="plan")


@plan_app.command(
    "capacity", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def capacity(
    ctx: typer.Context,
    pool: PoolOption = None,
    model: MaybeModelOption = None,
    gpu: MaybeGpuOption = None,
    study: Annotated[
        str | None, typer.Option(help="Plan with this study's best configuration.")
    ] = None,
    engine: EngineOption = DEFAULT_ENGINE,
    workload: WorkloadOption = None,
    trace: TraceOption = None,
    input_len: InputLenOption = None,
    output_len: OutputLenOption = None,
    rate: RateOption = None,
    time_scale: TimeScaleOption = None,
    num_requests: NumRequestsOption = None,
    slo: SloOption = None,
    seed: SeedOption = 0,
    headroom: Annotated[
        float, typer.Option(help="Spare capacity over the peak (0.2 = 20 %).")
    ] = 0.2,
    gpu_price: GpuPriceOption = None,
    split_threshold: Annotated[
        float | None,
        typer.Option(help="Short/long split in input + output tokens (default: searched)."),
    ] = None,
    sample_requests: Annotated[
        int, typer.Option(min=50, help="Requests per simulated capacity measurement.")
    ] = 1000,
    no_store: NoStoreOption = False,
    json_: JsonOption = False,
) -> None:
    """Replicas and GPUs per pool for the trace's peak under the SLOs, and what they cost.

    Sizes one pool and a short/long split from each configuration's simulated capacity under
    the SLOs, prices both per hour and per million tokens, and says whether the split pays.

    Engine flags (vLLM's names) after the options configure --model/--gpu, e.g.
    slotune plan capacity --model llama-3.1-8b --gpu h100-sxm --workload azure-conv
    --slo ttft:p99<=500ms --slo tpot:p99<=50ms --max-num-seqs 128
    """
    from slotune.tuner.fleet import CapacityRequest, run_capacity_plan

    inputs = fleet_inputs(
        pool,
        engine=engine,
        workload=workload,
        trace=trace,
        input_len=input_len,
        output_len=output_len,
        rate=rate,
        time_scale=time_scale,
        num_requests=num_requests,
        slo=slo,
        seed=seed,
    )
    request = CapacityRequest(
        inputs,
        model=model,
        gpu=gpu,
        engine_flags=tuple(ctx.args),
        study=study,
        headroom=headroom,
        gpu_price=tuple(gpu_price or ()),
        split_threshold=split_threshold,
        sample_requests=sample_requests,
    )
    say = None if json_ else lambda what: err_console.print(f"measuring {what}…")
    plan = run_capacity_plan(request, db_url(ctx), store=not no_store, progress=say)
    if json_:
        print_json(plan.to_dict())
        return
    _render_capacity(plan)


def _render_capacity(plan: CapacityPlan) -> None:
    table = Table(
        title=f"peak {plan.peak_rate:.2f} req/s (mean {plan.mean_rate:.2f}), headroom "
        f"{plan.headroom:.0%}, GPU prices as of {plan.prices_as_of}",
        title_justify="left",
    )
    table.add_column("layout")
    table.add_column("pool")
    for col in ("share", "1 replica req/s", "replicas", "GPUs", "$/h", "$/M tokens"):
        table.add_column(col, justify="right")
    layouts = [plan.one_pool] + ([plan.split] if plan.split is not None else [])
    for layout in layouts:
        label = layout.layout
        if layout.threshold_tokens is not None:
            label += f" > {layout.threshold_tokens:,.0f} tok"
        for p in layout.pools:
            table.add_row(
                label,
                p.pool,
                f"{p.request_share:.0%}",
                f"{p.capacity_rps:.2f}",
                str(p.replicas),
                str(p.gpus),
                f"{p.cost_per_hour:.2f}",
                "",
            )
            label = ""
        table.add_row(
            "",
            "total",
            "",
            "",
            "",
            str(layout.gpus),
            f"{layout.cost_per_hour:.2f}",
            f"{layout.cost_per_million_tokens:.3f}",
            style="bold",
            end_section=True,
        )
    console.print(table)
    for model, gpu in {(p.model, p.gpu) for layout in layouts for p in layout.pools}:
        console.print(f"replicas: {model} on {gpu}", highlight=False)
    if plan.split is None:
        console.print("no short/long split met the SLOs: one pool it is")
    elif plan.split_pays:
        saved = plan.one_pool.cost_per_hour - plan.split.cost_per_hour
        console.print(f"the split pays: ${saved:.2f}/h less than one pool")
    else:
        console.print("the split does not pay: one pool costs no more")


@plan_app.command("autoscale")
def autoscale(
    ctx: typer.Context,
    pool: PoolOption = None,
    routing: Annotated[
        str, typer.Option(help="Routing policy in front of the fleet (as fleet simulate).")
    ] = "least-requests",
    scaling: Annotated[
        list[str] | None,
        typer.Option(
            help="Scaling policy, repeatable: waiting:N (waiting requests per replica), "
            "kv:F (KV usage), ttft:300ms (predicted queueing), schedule:SECONDS=N,… "
            "(default: waiting:4, kv:0.8, ttft:half the TTFT SLO)."
        ),
    ] = None,
    cold_start: Annotated[str, typer.Option(help="Replica start-up delay (model load).")] = "120s",
    cooldown: Annotated[str, typer.Option(help="Scale-down stabilisation window.")] = "300s",
    interval: Annotated[str, typer.Option(help="How often the autoscaler decides.")] = "15s",
    min_replicas: Annotated[int, typer.Option(min=1, help="Fewest replicas per group.")] = 1,
    max_replicas: Annotated[int, typer.Option(min=1, help="Most replicas per group.")] = 64,
    days: Annotated[int, typer.Option(min=1, help="Replay the trace this many times.")] = 1,
    diurnal: Annotated[
        float, typer.Option(help="Day curve amplitude in [0, 1): night 1-A, midday 1+A.")
    ] = 0.0,
    flash_crowd: Annotated[
        list[str] | None,
        typer.Option(help="AT_S:DURATION_S:FACTOR, repeatable (seconds of the replay)."),
    ] = None,
    shedding: Annotated[
        bool, typer.Option(help="Also find the load-shedding margin (needs a TTFT SLO).")
    ] = True,
    burst: Annotated[str, typer.Option(help="Burst length of the shedding analysis.")] = "120s",
    engine: EngineOption = DEFAULT_ENGINE,
    workload: WorkloadOption = None,
    trace: TraceOption = None,
    input_len: InputLenOption = None,
    output_len: OutputLenOption = None,
    rate: RateOption = None,
    time_scale: TimeScaleOption = None,
    num_requests: NumRequestsOption = None,
    slo: SloOption = None,
    seed: SeedOption = 0,
    gpu_price: GpuPriceOption = None,
    outage: OutageOption = None,
    route_config: RouteConfigOption = None,
    no_circuit_breaker: NoBreakerOption = False,
    no_store: NoStoreOption = False,
    json_: JsonOption = False,
) -> None:
    """Replay a trace against scaling policies; find the load-shedding margin.

    The trace can be repeated (--days), day-curved (--diurnal) and flash-crowded; replicas
    start after --cold-start. Per policy: SLO violations, shed requests, GPU-hours and the
    order pools grow and shrink; then the slo-aware margin that keeps TTFT within the SLO
    under overload while shedding under 1 % of a burst the fleet can absorb.

    Example: slotune plan autoscale --pool a:2:llama-3.1-8b:h100-sxm --workload azure-conv
    --time-scale 0.25 --days 2 --diurnal 0.6 --flash-crowd 1300:60:3 --slo ttft:p99<=1s
    """
    from slotune.tuner.fleet import AutoscaleRequest, run_autoscale_plan

    inputs = fleet_inputs(
        pool,
        engine=engine,
        workload=workload,
        trace=trace,
        input_len=input_len,
        output_len=output_len,
        rate=rate,
        time_scale=time_scale,
        num_requests=num_requests,
        slo=slo,
        seed=seed,
    )
    request = AutoscaleRequest(
        inputs,
        health=health_inputs(outage, route_config, no_circuit_breaker),
        routing=routing,
        scaling=tuple(scaling or ()),
        cold_start=cold_start,
        cooldown=cooldown,
        interval=interval,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        days=days,
        diurnal=diurnal,
        flash_crowds=tuple(flash_crowd or ()),
        shedding=shedding,
        burst=burst,
        gpu_price=tuple(gpu_price or ()),
    )
    with _replay_bar(enabled=not json_) as say:
        outcome = run_autoscale_plan(request, db_url(ctx), store=not no_store, progress=say)
    if json_:
        print_json(outcome.to_dict())
        return
    _render_autoscale(outcome.autoscale, outcome.shedding)


@contextmanager
def _replay_bar(*, enabled: bool) -> Iterator[ReplayProgress | None]:
    """A progress bar on stderr per replay, in simulated seconds (none for --json)."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f} / {task.total:,.0f} s simulated"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        refresh_per_second=2,  # a replay runs for minutes: redrawing costs CPU it would use
    )
    tasks: dict[str, TaskID] = {}

    def say(what: str, done_s: float, total_s: float) -> None:
        if what not in tasks:
            tasks[what] = bar.add_task(what, total=total_s)
        bar.update(tasks[what], completed=done_s)

    with bar:
        yield say


def _render_autoscale(plan: AutoscalePlan, shed: SheddingPlan | None) -> None:
    table = Table(title=f"autoscaling under {plan.routing}", title_justify="left")
    table.add_column("scaling", no_wrap=True)
    failing = any(r.failed or r.breaker_ejections for r in plan.results)
    cols = ("SLO violations", "shed", *(("failed", "ejections") if failing else ()))
    for col in (*cols, "GPU-h", "max replicas", "goodput"):
        table.add_column(col, justify="right")
    table.add_column("grows / shrinks")
    for r in plan.results:
        table.add_row(
            r.scaling,
            f"{r.slo_violations:,}",
            f"{r.shed:,}",
            *((f"{r.failed:,}", str(r.breaker_ejections)) if failing else ()),
            f"{r.gpu_hours:.2f}",
            str(r.max_replicas),
            f"{r.goodput:.2f}",
            f"{' > '.join(r.grow_order) or '-'} / {' > '.join(r.shrink_order) or '-'}",
        )
    console.print(table)
    costs = ", ".join(f"{c.pool} ${c.cost_per_request * 1e3:.4f}/1k req" for c in plan.costs)
    console.print(f"cost per SLO-met request (grow cheapest first): {costs}", highlight=False)
    if shed is None:
        return
    normal = (
        "the fleet misses the SLOs even without a burst"
        if shed.absorbable_factor is None
        else f"normal burst x{shed.absorbable_factor:g}"
    )
    st = Table(
        title=f"load shedding (slo-aware over {shed.routing}, TTFT budget "
        f"{shed.ttft_budget_s * 1000:.0f} ms): {normal}, overload "
        f"x{shed.overload_factor:g}, bursts of {shed.burst_s:.0f}s",
        title_justify="left",
    )
    for col in ("margin", "burst wrongly shed", "overload shed", "admitted TTFT ok", "goodput"):
        st.add_column(col, justify="right")
    for m in shed.margins:
        st.add_row(
            f"{m.margin:g}",
            "-" if m.burst_shed_share is None else f"{m.burst_shed_share:.2%}",
            f"{m.overload_shed_share:.1%}",
            "yes" if m.overload_ttft_met else "no",
            f"{m.overload_goodput:.2f}",
        )
    console.print(st)
    margin = shed.recommended_margin
    console.print(
        f"recommended: slo-aware:{shed.routing}:margin={margin:g}"
        if margin is not None
        else "no margin both protects TTFT under overload and sheds < 1 % of a normal burst"
    )
