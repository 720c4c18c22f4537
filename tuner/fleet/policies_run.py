"""``slotune fleet simulate`` end to end: the routing policies compared, and the stored row."""

from __future__ import annotations

from collections.abc import Callable

from slotune.collector.stored_results import store_result
from slotune.collector.views import FLEET_SIM
from slotune.tuner.fleet.inputs import FleetInputs, HealthInputs
from slotune.tuner.fleet.simulator import FleetResult, compare_policies


def run_policy_comparison(
    inputs: FleetInputs,
    policy: str,
    db_url: str | None,
    *,
    health: HealthInputs | None = None,
    known_output: bool = False,
    store: bool = True,
    progress: Callable[[str], None] | None = None,
) -> list[FleetResult]:
    """Replay the workload through the pools under each routing policy; store the results.

    Args:
        inputs: the pools, workload and SLOs.
        policy: ``P[,P…]`` or ``all``.
        db_url: the store the results are written to.
        health: replica outages and the breakers facing them.
        known_output: clients send max_tokens = the output length.
        store: save the results as a ``fleet-sim`` row.
        progress: called with the policy being simulated.

    Raises:
        ConfigError: bad input, naming the flag, before anything runs.
    """
    health = health or HealthInputs()
    pools, trace, slos = inputs.load()
    outages, settings = health.load()
    results = compare_policies(
        pools,
        trace,
        policy,
        slos=slos,
        known_output=known_output,
        outages=outages,
        health=settings,
        progress=progress,
    )
    if store:
        stored = {
            "pools": list(inputs.pools),
            "policy": policy,
            "workload": inputs.workload.label,
            "num_requests": len(trace),
            "slo": list(inputs.slos),
            "outage": list(health.outages),
            "circuit_breaker": settings.to_dict(),
        }
        result = {"policies": [r.to_dict() for r in results]}
        store_result(db_url, FLEET_SIM, stored, result, subject=",".join(inputs.pools))
    return results
