"""``slotune plan capacity`` end to end: the configuration to size, the plan, the stored row."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slotune.collector.errors import ConfigError
from slotune.collector.stored_results import store_result
from slotune.collector.views import FLEET_PLAN
from slotune.tuner.fleet.capacity import (
    DEFAULT_HEADROOM,
    DEFAULT_SAMPLE_REQUESTS,
    CapacityPlan,
    plan_capacity,
)
from slotune.tuner.fleet.inputs import FleetInputs
from slotune.tuner.fleet.pools import PoolSpec, pool_from_study
from slotune.tuner.fleet.prices import gpu_prices


@dataclass(frozen=True, slots=True)
class CapacityRequest:
    """What to size: given once, as ``--pool``s, as a model and GPU with engine flags, or as
    a study's best configuration."""

    inputs: FleetInputs
    model: str | None = None
    gpu: str | None = None
    engine_flags: tuple[str, ...] = ()
    study: str | None = None
    headroom: float = DEFAULT_HEADROOM
    gpu_price: tuple[str, ...] = ()
    split_threshold: float | None = None
    sample_requests: int = DEFAULT_SAMPLE_REQUESTS


def run_capacity_plan(
    request: CapacityRequest,
    db_url: str | None,
    *,
    store: bool = True,
    progress: Callable[[str], None] | None = None,
) -> CapacityPlan:
    """Plan replicas and GPUs per pool for the trace's peak, and store the plan.

    Args:
        request: the configuration, workload, SLOs and prices.
        db_url: the store (a study is read from it; the plan is written to it).
        store: save the plan as a ``fleet-plan`` row.
        progress: called with what is being measured.

    Raises:
        ConfigError: the configuration given none or several ways, lengths without a rate,
            or bad input, naming the flag.
    """
    from slotune.tuner.sim import parse_engine_flags

    given = sum(
        (
            bool(request.inputs.pools),
            request.model is not None or request.gpu is not None,
            request.study is not None,
        )
    )
    if given != 1:
        raise ConfigError("give the configuration once: --pool …, --model and --gpu, or --study")
    workload = request.inputs.workload
    if workload.input_len is not None and workload.rate is None:
        raise ConfigError("--input-len/--output-len need --rate R (the peak to plan for)")
    pools, trace, slos = request.inputs.load()
    if request.study is not None:
        pools = [pool_from_study(request.study, db_url)]
    elif not pools:
        config = parse_engine_flags(
            request.engine_flags,
            engine=request.inputs.engine,
            model=request.model,
            gpu=request.gpu,
        )
        pools = [PoolSpec("all", 1, config)]
    plan = plan_capacity(
        pools,
        trace,
        slos,
        gpu_prices(request.gpu_price),
        rate=workload.rate,
        headroom=request.headroom,
        split_threshold=request.split_threshold,
        sample_requests=request.sample_requests,
        seed=workload.seed,
        progress=progress,
    )
    if store:
        _store(request, pools, plan, db_url)
    return plan


def _store(
    request: CapacityRequest, pools: Sequence[PoolSpec], plan: CapacityPlan, db_url: str | None
) -> None:
    labels = list(request.inputs.pools) or [f"{p.name}:{p.model}:{p.gpu}" for p in pools]
    inputs = {
        "pools": labels,
        "workload": request.inputs.workload.label,
        "rate": request.inputs.workload.rate,
        "slo": list(request.inputs.slos),
        "headroom": request.headroom,
        "gpu_price": list(request.gpu_price),
    }
    store_result(db_url, FLEET_PLAN, inputs, plan.to_dict(), subject=",".join(labels))
