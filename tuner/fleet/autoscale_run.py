"""``slotune plan autoscale`` end to end: the replayed trace, the scaling policies compared,
the load-shedding margin, and the stored row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slotune.collector.durations import parse_duration_s
from slotune.collector.slo import SLO
from slotune.collector.stored_results import store_result
from slotune.collector.views import FLEET_AUTOSCALE
from slotune.collector.workload import Trace
from slotune.tuner.fleet.autoscale import ScalingPolicy, ScalingSettings
from slotune.tuner.fleet.autoscale_plan import AutoscalePlan, plan_autoscale
from slotune.tuner.fleet.inputs import FleetInputs, HealthInputs
from slotune.tuner.fleet.prices import gpu_prices
from slotune.tuner.fleet.replay_trace import FlashCrowd, diurnal, inject_flash_crowd, repeat_days
from slotune.tuner.fleet.shedding import SheddingPlan, plan_shedding
from slotune.tuner.fleet.simulator import ReplayProgress

DEFAULT_TTFT_BUDGET_S = 1.0  # without a TTFT SLO, the ttft policy aims at half a second


@dataclass(frozen=True, slots=True)
class AutoscaleRequest:
    """The replay (days, day curve, flash crowds), the policies and the autoscaler's timing.

    Durations are the flags' text (``120s``, ``5m``); ``scaling`` empty means the defaults of
    :func:`default_scaling`.
    """

    inputs: FleetInputs
    health: HealthInputs = field(default_factory=HealthInputs)
    routing: str = "least-requests"
    scaling: tuple[str, ...] = ()
    cold_start: str = "120s"
    cooldown: str = "300s"
    interval: str = "15s"
    min_replicas: int = 1
    max_replicas: int = 64
    days: int = 1
    diurnal: float = 0.0
    flash_crowds: tuple[str, ...] = ()
    shedding: bool = True
    burst: str = "120s"
    gpu_price: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AutoscaleOutcome:
    """The policies compared and, when asked and a TTFT SLO allows, the shedding margins."""

    autoscale: AutoscalePlan
    shedding: SheddingPlan | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "autoscale": self.autoscale.to_dict(),
            "shedding": None if self.shedding is None else self.shedding.to_dict(),
        }


def default_scaling(slos: Sequence[SLO]) -> list[str]:
    """Queue depth, KV usage, and predicted queueing at half the tightest TTFT SLO."""
    ttft = [s.threshold for s in slos if s.sli.value == "ttft"]
    budget_s = min(ttft) if ttft else DEFAULT_TTFT_BUDGET_S
    return ["waiting:4", "kv:0.8", f"ttft:{budget_s / 2:g}s"]


def replay_trace(base: Trace, request: AutoscaleRequest) -> Trace:
    """The base trace repeated over ``days``, day-curved, with the flash crowds injected.

    Raises:
        ConfigError: a bad flash crowd, naming it.
    """
    crowds = [FlashCrowd.parse(c) for c in request.flash_crowds]
    replay = diurnal(repeat_days(base, request.days), base.duration_s, request.diurnal)
    for crowd in crowds:
        replay = inject_flash_crowd(replay, crowd, request.inputs.workload.seed)
    return replay


def run_autoscale_plan(
    request: AutoscaleRequest,
    db_url: str | None,
    *,
    store: bool = True,
    progress: ReplayProgress | None = None,
) -> AutoscaleOutcome:
    """Replay the trace against each scaling policy, find the shedding margin, store both.

    Args:
        request: what to replay and compare.
        db_url: the store the outcome is written to.
        store: save the outcome as a ``fleet-autoscale`` row.
        progress: called per replay with (what, simulated seconds done, total).

    Raises:
        ConfigError: bad input, naming the flag, before any replay runs.
    """
    pools, base, slos = request.inputs.load()
    settings = ScalingSettings(
        cold_start_s=parse_duration_s(request.cold_start, field_name="--cold-start"),
        cooldown_s=parse_duration_s(request.cooldown, field_name="--cooldown"),
        interval_s=parse_duration_s(request.interval, field_name="--interval"),
        min_replicas=request.min_replicas,
        max_replicas=request.max_replicas,
    )
    outages, health = request.health.load()
    specs = list(request.scaling) or default_scaling(slos)
    policies = [ScalingPolicy.parse(s) for s in specs]
    replay = replay_trace(base, request)
    burst_s = parse_duration_s(request.burst, field_name="--burst")
    seed = request.inputs.workload.seed
    plan = plan_autoscale(
        pools,
        replay,
        policies,
        settings,
        gpu_prices(request.gpu_price),
        routing=request.routing,
        slos=slos,
        day_s=base.duration_s,
        seed=seed,
        outages=outages,
        health=health,
        progress=progress,
    )
    # the margin is measured against the TTFT budget: without a TTFT SLO there is none to find
    has_ttft = any(s.sli.value == "ttft" for s in slos)
    shed = (
        plan_shedding(
            pools,
            replay,
            slos,
            routing=request.routing,
            burst_s=burst_s,
            seed=seed,
            progress=progress,
        )
        if request.shedding and has_ttft
        else None
    )
    outcome = AutoscaleOutcome(plan, shed)
    if store:
        _store(request, specs, health.to_dict(), outcome, db_url)
    return outcome


def _store(
    request: AutoscaleRequest,
    specs: Sequence[str],
    circuit_breaker: dict[str, Any],
    outcome: AutoscaleOutcome,
    db_url: str | None,
) -> None:
    inputs = {
        "pools": list(request.inputs.pools),
        "routing": request.routing,
        "scaling": list(specs),
        "workload": request.inputs.workload.label,
        "time_scale": request.inputs.workload.time_scale,
        "days": request.days,
        "diurnal": request.diurnal,
        "flash_crowd": list(request.flash_crowds),
        "cold_start": request.cold_start,
        "cooldown": request.cooldown,
        "slo": list(request.inputs.slos),
        "outage": list(request.health.outages),
        "circuit_breaker": circuit_breaker,
    }
    subject = ",".join(request.inputs.pools)
    store_result(db_url, FLEET_AUTOSCALE, inputs, outcome.to_dict(), subject=subject)
