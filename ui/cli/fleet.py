"""``slotune fleet simulate``: compare routing policies on a fleet of simulated replicas."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from slotune.collector.vocabulary import DEFAULT_ENGINE, PolicyKind
from slotune.ui.cli._common import JsonOption, console, db_url, err_console, print_json
from slotune.ui.cli._fleet import (
    KnownOutputOption,
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
    from slotune.tuner.fleet import FleetResult

fleet_app = typer.Typer(
    help="Simulate a fleet of replicas behind a router and compare routing policies on your "
    "trace. See docs/fleet.md.",
    no_args_is_help=True,
)

PolicyOption = Annotated[
    str,
    typer.Option(
        "--policy",
        help=f"P[,P…] or all: {', '.join(PolicyKind)}[:INNER]; keys as "
        "score:prefix=3:queue=1:kv=1.",
    ),
]


def register(app: typer.Typer) -> None:
    app.add_typer(fleet_app, name="fleet")


@fleet_app.command("simulate")
def simulate(
    ctx: typer.Context,
    pool: PoolOption = None,
    policy: PolicyOption = "all",
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
    known_output: KnownOutputOption = False,
    outage: OutageOption = None,
    route_config: RouteConfigOption = None,
    no_circuit_breaker: NoBreakerOption = False,
    no_store: NoStoreOption = False,
    json_: JsonOption = False,
) -> None:
    """Replay a workload through pools of simulated replicas under each routing policy;
    rank the policies by goodput under the SLOs.

    Example: slotune fleet simulate --pool a:4:llama-3.1-8b:h100-sxm --workload
    mooncake-conversation --num-requests 2000 --policy round-robin,prefix-affinity,score
    --slo ttft:p99<=2s
    """
    from slotune.tuner.fleet import run_policy_comparison

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
    results = run_policy_comparison(
        inputs,
        policy,
        db_url(ctx),
        health=health_inputs(outage, route_config, no_circuit_breaker),
        known_output=known_output,
        store=not no_store,
        progress=None if json_ else lambda name: err_console.print(f"simulating {name}…"),
    )
    if json_:
        print_json([r.to_dict() for r in results])
        return
    _render(results)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _render(results: list[FleetResult]) -> None:
    table = Table(title="policies, best goodput first (latencies in ms)", title_justify="left")
    table.add_column("policy", no_wrap=True)
    for col in ("goodput", "TTFT p50", "TTFT p99", "ITL p99", "TPOT p99", "E2E p99"):
        table.add_column(col, justify="right")
    failing = any(r.figures.failed or r.figures.breaker_ejections for r in results)
    for col in ("prefix hit", "shed", "GPU-h", *(("failed", "ejections") if failing else ())):
        table.add_column(col, justify="right")
    for r in results:
        s, f = r.summary, r.figures
        table.add_row(
            r.policy,
            f"{s.goodput:.2f}",
            _ms(s.ttft_ms.percentiles[50.0]),
            *(_ms(d.percentiles[99.0]) for d in (s.ttft_ms, s.itl_ms, s.tpot_ms, s.e2e_ms)),
            f"{f.prefix_hit_rate:.1%}",
            f"{f.shed_share:.1%}",
            f"{f.gpu_hours:.2f}",
            *((f"{f.failed:,}", str(f.breaker_ejections)) if failing else ()),
        )
    console.print(table)
    best = results[0]
    per = Table(title=f"replicas under {best.policy}", title_justify="left")
    for col in ("replica", "pool", "requests", "busy", "queue mean/p99 (ms)", "prefix hit"):
        per.add_column(col, justify="left" if col in ("replica", "pool") else "right")
    for rep in best.replicas:
        per.add_row(
            rep.name,
            rep.pool,
            str(rep.num_requests),
            f"{rep.busy_fraction:.0%}",
            f"{_ms(rep.queue_ms_mean)} / {_ms(rep.queue_ms_p99)}",
            f"{rep.prefix_hit_rate:.1%}",
        )
    console.print(per)
