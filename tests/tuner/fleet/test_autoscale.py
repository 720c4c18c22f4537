"""Autoscaling replay, trace shaping and the shedding analysis, on small bounded traces."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from slotune.collector.errors import ConfigError
from slotune.collector.slo import parse_slos
from slotune.collector.store import list_diagnoses, open_store, upgrade
from slotune.collector.workload import Trace, TraceRequest
from slotune.tuner.fleet import ReplicaState
from slotune.tuner.fleet.autoscale import ScalingMetric, ScalingPolicy, ScalingSettings
from slotune.tuner.fleet.autoscale_plan import plan_autoscale
from slotune.tuner.fleet.pools import parse_pool
from slotune.tuner.fleet.prices import gpu_prices
from slotune.tuner.fleet.replay_trace import (
    FlashCrowd,
    diurnal,
    inject_flash_crowd,
    repeat_days,
)
from slotune.tuner.fleet.shedding import WRONG_SHED_TARGET, plan_shedding
from slotune.ui.cli import app


def _step_trace() -> Trace:
    # 60 s quiet (1 req/s), 60 s busy (40 req/s), 120 s quiet again
    times = [float(t) for t in range(60)]
    times += [60 + i / 40 for i in range(2400)]
    times += [120 + float(t) for t in range(120)]
    return Trace(
        "step",
        tuple(TraceRequest(t, 1500, 200 + (i % 3) * 100) for i, t in enumerate(times)),
    )


def _waiting(*counts: int) -> list[ReplicaState]:
    return [ReplicaState(f"r{i}", "p", "m", num_waiting=n) for i, n in enumerate(counts)]


def test_scaling_specs_parse_or_name_the_fix() -> None:
    assert ScalingPolicy.parse("ttft:300ms").target == pytest.approx(0.3)
    assert ScalingPolicy.parse("kv:0.7").metric is ScalingMetric.KV
    assert ScalingPolicy.parse("schedule:600=4,0=2").schedule == ((0.0, 2), (600.0, 4))
    for bad in ("queue:3", "kv:1.5", "waiting:x", "schedule:a=b", "ttft:fast"):
        with pytest.raises(ConfigError, match="--scaling"):
            ScalingPolicy.parse(bad)


def test_desired_replicas_follow_the_hpa_rule() -> None:
    waiting = ScalingPolicy.parse("waiting:4")
    assert waiting.desired(0, 100, _waiting(8, 8), 2) == 4
    # two more are starting: they count as idle, the queue is not ordered for twice
    assert waiting.desired(0, 100, _waiting(8, 8), 4) is None
    assert waiting.desired(0, 100, _waiting(0, 1), 2) == 1
    schedule = ScalingPolicy.parse("schedule:0=1,50=3")
    assert [schedule.desired(t, 100, [], 1) for t in (10, 60, 110)] == [1, 3, 1]


def test_trace_shaping_keeps_or_adds_requests_as_told() -> None:
    base = _step_trace()
    two = repeat_days(base, 2)
    assert len(two) == 2 * len(base)
    assert two.requests[len(base)].timestamp_s > base.duration_s
    curved = diurnal(base, base.duration_s, 0.5)
    assert len(curved) == len(base)
    assert [r.timestamp_s for r in curved.requests] == sorted(
        r.timestamp_s for r in curved.requests
    )
    crowd = inject_flash_crowd(base, FlashCrowd(0, 60, 3), seed=1)
    assert len(crowd) == len(base) + 2 * 60
    with pytest.raises(ConfigError, match="--flash-crowd"):
        FlashCrowd.parse("10:5")


def test_autoscaling_grows_the_cheapest_pool_after_a_cold_start_and_shrinks_the_dearest() -> None:
    pools = [parse_pool("a:1:llama-3.1-8b:h100-sxm"), parse_pool("b:0:llama-3.1-8b:a100-80gb")]
    # without SLOs the price per replica-hour orders the pools: b is cheaper
    prices = gpu_prices(["h100-sxm=3", "a100-80gb=1"])
    settings = ScalingSettings(cold_start_s=20, cooldown_s=30, interval_s=5)
    plan = plan_autoscale(
        pools, _step_trace(), [ScalingPolicy.parse("waiting:2")], settings, prices
    )
    assert [c.pool for c in plan.costs] == ["b", "a"]
    static, scaled = plan.results
    assert static.scaling == "static" and static.events == ()
    events = scaled.events
    assert events[0].change == +1 and events[0].pool == "b" and events[0].time_s >= 60
    assert any(e.change == -1 for e in events)
    data = scaled.to_dict()
    assert data["grow_order"] == ["b"]
    # requests are all served once, and no replica served before it was ready
    assert scaled.ttft_ms.count == len(_step_trace())
    assert scaled.max_replicas > 1
    assert static.gpu_hours < scaled.gpu_hours or (scaled.slo_violations <= static.slo_violations)


def test_shedding_plan_keeps_wrong_sheds_of_a_normal_burst_under_target() -> None:
    trace = Trace(
        "steady",
        tuple(TraceRequest(i * 0.1, 1000, 100) for i in range(600)),
    )
    pools = [parse_pool("a:1:llama-3.1-8b:h100-sxm")]
    plan = plan_shedding(
        pools, trace, parse_slos(["ttft:p99<=300ms"]), burst_s=10, margins=(0.25, 1.0)
    )
    assert plan.absorbable_factor is not None and plan.overload_factor > plan.absorbable_factor
    for m in plan.margins:
        assert m.burst_shed_share is not None and 0 <= m.burst_shed_share <= 1
    if plan.recommended_margin is not None:
        chosen = next(m for m in plan.margins if m.margin == plan.recommended_margin)
        assert chosen.burst_shed_share is not None
        assert chosen.burst_shed_share < WRONG_SHED_TARGET and chosen.overload_ttft_met
    with pytest.raises(ConfigError, match="need a TTFT SLO"):
        plan_shedding(pools, trace, parse_slos(["tpot:p99<=50ms"]))


def test_plan_autoscale_cli_json_is_stored(store_url: str) -> None:
    upgrade(store_url)
    args = ["--db", store_url, "plan", "autoscale", "--pool", "a:1:llama-3.1-8b:h100-sxm"]
    args += ["--workload", "azure-code", "--num-requests", "300", "--time-scale", "0.2"]
    args += ["--scaling", "waiting:2", "--cold-start", "30s", "--no-shedding", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [p["scaling"] for p in data["autoscale"]["policies"]] == ["static", "waiting:2"]
    assert data["shedding"] is None
    with open_store(store_url) as store:
        (stored,) = list_diagnoses(store, kind="fleet-autoscale")
    assert stored.result == data


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--scaling", "cpu:50"], "--scaling 'cpu:50': unknown metric"),
        (["--flash-crowd", "x"], "--flash-crowd 'x'"),
        (["--cold-start", "soon"], "--cold-start: 'soon' is not a duration"),
        (["--routing", "nearest"], "unknown policy 'nearest'"),
    ],
)
def test_plan_autoscale_bad_input_is_one_line(extra: list[str], message: str) -> None:
    args = ["plan", "autoscale", "--pool", "a:1:llama-3.1-8b:h100-sxm", "--no-store"]
    result = CliRunner().invoke(app, [*args, "--workload", "azure-code", *extra])
    assert result.exit_code == 1
    assert message in result.output
