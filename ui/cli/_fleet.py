"""Options and helpers shared by ``slotune fleet`` and ``slotune plan`` (no command here).

Only typer is imported at module level: every ``slotune`` run builds the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slotune.ui.cli._common import db_url
from slotune.ui.cli._options import WORKLOAD_PANEL

if TYPE_CHECKING:
    from slotune.collector.slo import SLO
    from slotune.collector.workload import Trace
    from slotune.tuner.fleet.health import HealthSettings, Outage
    from slotune.tuner.fleet.pools import PoolSpec

PoolOption = Annotated[
    list[str] | None,
    typer.Option(
        "--pool",
        help="NAME:REPLICAS:MODEL:GPU[:CONFIG], repeatable; CONFIG = vLLM flags or a file "
        "holding `slotune tune export` output.",
    ),
]
InputLenOption = Annotated[
    str | None,
    typer.Option(
        "--input-len",
        help="Synthetic prompt lengths: 512, uniform:128,1024, lognormal:6.2,0.8.",
        rich_help_panel=WORKLOAD_PANEL,
    ),
]
OutputLenOption = Annotated[
    str | None,
    typer.Option("--output-len", help="Synthetic output lengths.", rich_help_panel=WORKLOAD_PANEL),
]
KnownOutputOption = Annotated[
    bool,
    typer.Option(
        "--known-output",
        help="Clients send max_tokens = the output length (else the router estimates it).",
    ),
]

OutageOption = Annotated[
    list[str] | None,
    typer.Option(
        "--outage",
        help="NAME:AT_S:DURATION_S[:down|hang], repeatable: replica NAME (POOL-i) fails at "
        "AT_S for DURATION_S, refusing connections (down) or never answering (hang).",
    ),
]
RouteConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--route-config",
        help="A fleet.yaml of slotune route: its circuit_breaker, poll_interval and "
        "timeouts.first_byte face the outages (default: route's defaults).",
    ),
]
NoBreakerOption = Annotated[
    bool,
    typer.Option("--no-circuit-breaker", help="Replay the outages without circuit breakers."),
]


def load_health(
    outage: list[str] | None, route_config: Path | None, no_circuit_breaker: bool
) -> tuple[list[Outage], HealthSettings]:
    """Outages and the breaker settings facing them (raises ConfigError naming the flag)."""
    from dataclasses import replace

    from slotune.tuner.fleet.health import HealthSettings, Outage
    from slotune.tuner.fleet.route_config import load_route_config

    settings = (
        HealthSettings()
        if route_config is None
        else HealthSettings.from_route_config(load_route_config(route_config))
    )
    if no_circuit_breaker:
        settings = replace(settings, breaker=None)
    return [Outage.parse(o) for o in outage or ()], settings


def load_inputs(
    pool: list[str] | None,
    *,
    engine: str,
    workload: str | None,
    trace: Path | None,
    input_len: str | None,
    output_len: str | None,
    rate: float | None,
    time_scale: float | None,
    num_requests: int | None,
    slo: list[str] | None,
    seed: int,
) -> tuple[list[PoolSpec], Trace, list[SLO]]:
    """Pools, trace and SLOs from the command line (raises ConfigError naming the flag)."""
    from slotune.collector.slo import parse_slos
    from slotune.tuner.fleet.pools import check_unique, parse_pool
    from slotune.tuner.sim.simulator import load_workload

    pools = [parse_pool(p, engine=engine) for p in pool or ()]
    if pools:
        check_unique(pools)
    trace_ = load_workload(
        workload=workload,
        trace_file=trace,
        input_len=input_len,
        output_len=output_len,
        num_requests=num_requests,
        rate=rate,
        time_scale=time_scale,
        seed=seed,
    )
    return pools, trace_, parse_slos(slo or [])


def store_result(
    ctx: typer.Context, kind: str, inputs: dict[str, Any], result: dict[str, Any]
) -> int:
    """Save a fleet result in the diagnosis table; returns its id."""
    from slotune.collector.store import open_store, save_diagnosis

    subject = ",".join(inputs.get("pools", []))[-200:]
    with open_store(db_url(ctx)) as store:
        return save_diagnosis(store, kind, inputs, result, subject=subject)
