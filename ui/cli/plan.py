"""``slotune plan capacity|autoscale``: size pools for a trace's peak; replay autoscaling."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from slotune.ui.cli._common import JsonOption, cli_errors, console, db_url, err_console, print_json
from slotune.ui.cli._fleet import (
    InputLenOption,
    OutputLenOption,
    PoolOption,
    load_inputs,
    store_result,
)
from slotune.ui.cli._options import (
    EngineOption,
    NumRequestsOption,
    RateOption,
    SeedOption,
    SloOption,
    TimeScaleOption,
    TraceOption,
    WorkloadOption,
)
from slotune.ui.cli.diagnose import NoStoreOption

if TYPE_CHECKING:
    from slotune.tuner.fleet.capacity import CapacityPlan

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
    model: Annotated[str | None, typer.Option(help="Catalog model id (without --pool).")] = None,
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU id (without --pool).")] = None,
    study: Annotated[
        str | None, typer.Option(help="Plan with this study's best configuration.")
    ] = None,
    engine: EngineOption = "vllm",
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
    """Replicas per pool and GPUs for the trace's peak (or --rate) under the SLOs, the cost
    per hour and per million tokens, and whether long/short pools pay.

    Engine flags (vLLM's names) after the options configure --model/--gpu, e.g.
    slotune plan capacity --model llama-3.1-8b --gpu h100-sxm --workload azure-conv
    --slo ttft:p99<=500ms --slo tpot:p99<=50ms --max-num-seqs 128
    """
    from slotune.collector.errors import ConfigError
    from slotune.tuner.fleet.capacity import plan_capacity
    from slotune.tuner.fleet.pools import PoolSpec, pool_from_study
    from slotune.tuner.fleet.prices import gpu_prices
    from slotune.tuner.sim import parse_engine_flags

    with cli_errors():
        given = sum((bool(pool), model is not None or gpu is not None, study is not None))
        if given != 1:
            raise ConfigError(
                "give the configuration once: --pool …, --model and --gpu, or --study"
            )
        if input_len is not None and rate is None:
            raise ConfigError("--input-len/--output-len need --rate R (the peak to plan for)")
        pools, trace_, slos = load_inputs(
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
        if study is not None:
            pools = [pool_from_study(study, db_url(ctx))]
        elif not pools:
            config = parse_engine_flags(ctx.args, engine=engine, model=model, gpu=gpu)
            pools = [PoolSpec("all", 1, config)]
        prices = gpu_prices(gpu_price or [])
        plan = plan_capacity(
            pools,
            trace_,
            slos,
            prices,
            rate=rate,
            headroom=headroom,
            split_threshold=split_threshold,
            sample_requests=sample_requests,
            seed=seed,
            progress=None if json_ else lambda what: err_console.print(f"measuring {what}…"),
        )
        data = plan.to_dict()
        if not no_store:
            inputs = {
                "pools": pool or [f"{p.name}:{p.model}:{p.gpu}" for p in pools],
                "workload": workload or (str(trace) if trace else None),
                "rate": rate,
                "slo": slo or [],
                "headroom": headroom,
                "gpu_price": gpu_price or [],
            }
            store_result(ctx, "fleet-plan", inputs, data)
    if json_:
        print_json(data)
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
