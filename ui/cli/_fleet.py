"""Options and helpers shared by ``slotune fleet`` and ``slotune plan`` (no command here).

Only typer is imported at module level: every ``slotune`` run builds the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from slotune.tuner.fleet import FleetInputs, HealthInputs

PoolOption = Annotated[
    list[str] | None,
    typer.Option(
        "--pool",
        help="NAME:REPLICAS:MODEL:GPU[:CONFIG], repeatable; CONFIG = vLLM flags or a file "
        "holding `slotune tune export` output.",
    ),
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


def fleet_inputs(
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
) -> FleetInputs:
    """The pools, workload and SLOs the shared fleet flags name (parsed when loaded)."""
    from slotune.tuner.fleet import FleetInputs
    from slotune.tuner.sim import WorkloadChoice

    choice = WorkloadChoice(
        workload, trace, input_len, output_len, rate, time_scale, num_requests, seed
    )
    return FleetInputs(tuple(pool or ()), choice, tuple(slo or ()), engine)


def health_inputs(
    outage: list[str] | None, route_config: Path | None, no_circuit_breaker: bool
) -> HealthInputs:
    """The outages and breaker flags (parsed when loaded)."""
    from slotune.tuner.fleet import HealthInputs

    return HealthInputs(tuple(outage or ()), route_config, not no_circuit_breaker)
