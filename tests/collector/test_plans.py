"""Fleet plans read back from the JSON they print and store, and from a stored older row."""

import json
import math

from slotune.collector.plans import (
    AutoscalePlan,
    CapacityPlan,
    LayoutPlan,
    MarginResult,
    PoolCost,
    PoolPlan,
    ScaleEvent,
    ScalingResult,
    SheddingPlan,
)
from slotune.collector.summary import Distribution


def _json(d: object) -> dict[str, object]:
    return json.loads(json.dumps(d))


def pool(name: str, replicas: int) -> PoolPlan:
    return PoolPlan(
        name, "llama-3.1-8b", "h100-sxm", 0.5, 10.0, 4.5, replicas, replicas, replicas * 1.0
    )


CAPACITY = CapacityPlan(
    peak_rate=20.0,
    mean_rate=8.0,
    headroom=0.2,
    one_pool=LayoutPlan("one-pool", None, (pool("all", 6),), 0.75),
    split=LayoutPlan("split", 2048.0, (pool("short", 2), pool("long", 3)), 0.5),
    prices_as_of="2025-06",
)
SCALED = ScalingResult(
    scaling="waiting:2",
    slo_violations=3,
    shed=0,
    failed=1,
    breaker_ejections=0,
    gpu_hours=0.25,
    max_replicas=3,
    goodput=4.5,
    slos_met=False,
    ttft_ms=Distribution.of([0.05, 0.25]),
    events=(
        ScaleEvent(60.0, "b", +1, 2),
        ScaleEvent(90.0, "a", +1, 3),
        ScaleEvent(150.0, "b", -1, 2),
    ),
)
AUTOSCALE = AutoscalePlan(
    routing="least-requests",
    day_s=300.0,
    costs=(PoolCost("b", 1.0, 4.0), PoolCost("a", 3.0, 0.0)),
    results=(
        ScalingResult("static", 0, 0, 0, 0, 0.1, 1, 4.0, True, Distribution.of([]), ()),
        SCALED,
    ),
)
SHEDDING = SheddingPlan(
    routing="least-requests",
    ttft_budget_s=0.5,
    burst_s=120.0,
    absorbable_factor=None,
    overload_factor=3.0,
    wrong_shed_target=0.01,
    margins=(MarginResult(0.5, None, 0.25, True, {"ttft-p99": 0.995}, 3.5),),
    recommended_margin=0.5,
)


def test_every_plan_reads_back_from_its_json() -> None:
    assert CapacityPlan.from_dict(_json(CAPACITY.to_dict())) == CAPACITY
    assert AutoscalePlan.from_dict(_json(AUTOSCALE.to_dict())) == AUTOSCALE
    assert SheddingPlan.from_dict(_json(SHEDDING.to_dict())) == SHEDDING


def test_the_json_keeps_its_derived_figures() -> None:
    data = CAPACITY.to_dict()
    assert (data["layout"], data["split_pays"], data["gpus"]) == ("split", True, 5)
    assert data["replicas"] == {"short": 2, "long": 3}
    assert math.isinf(AUTOSCALE.to_dict()["pool_costs"][1]["cost_per_request"])
    scaled = AUTOSCALE.to_dict()["policies"][1]
    assert (scaled["grow_order"], scaled["shrink_order"]) == (["b", "a"], ["b"])


def test_a_policy_timeline_steps_at_each_event() -> None:
    assert SCALED.timeline(1, 300.0) == (
        (0.0, 1),
        (60.0, 1),
        (60.0, 2),
        (90.0, 2),
        (90.0, 3),
        (150.0, 3),
        (150.0, 2),
        (300.0, 2),
    )
    assert AUTOSCALE.results[0].timeline(1, 300.0) == ()


def test_a_policy_stored_before_the_failure_counts_still_reads() -> None:
    stored = {
        "scaling": "static",
        "slo_violations": 2,
        "shed": 1,
        "gpu_hours": 0.5,
        "max_replicas": 2,
        "goodput": 3.0,
        "slos_met": True,
        "ttft_ms": {"mean": 40.0, "p50": 35.0, "p99": 80.0, "count": 12},
        "grow_order": [],
        "shrink_order": [],
        "events": [],
    }
    r = ScalingResult.from_dict(stored)
    assert (r.failed, r.breaker_ejections, r.ttft_ms.p99, r.events) == (0, 0, 80.0, ())
