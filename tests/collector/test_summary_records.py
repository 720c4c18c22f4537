"""The run summary and its figures read back from the JSON they write, and from older JSON."""

import json
import math

from _summaries import run_summary

from slotune.collector.run_figures import (
    FleetFigures,
    LoadFigures,
    ScrapedEngineFigures,
    SendLag,
    SimEngineFigures,
    StepBreakdown,
)
from slotune.collector.slo import Attainment, parse_slo
from slotune.collector.summary import PERCENTILES, Distribution, Summary

LATENCY = Distribution(
    count=3,
    mean=120.5,
    std=4.25,
    percentiles=dict(zip(PERCENTILES, (100.0, 110.0, 115.0, 125.0, 130.0), strict=True)),
)
ATTAINMENT = (
    Attainment(parse_slo("ttft:p99<=500ms", name="chat-ttft"), 3, 4, 0.25),
    Attainment(parse_slo("error_rate<=1%"), 4, 4, 0.0),
)
LOAD = LoadFigures(
    target_rate=math.inf,
    offered_rate=4.5,
    achieved_rate=4.25,
    send_lag_ms=SendLag(0.5, 2.0, 3.5),
    num_warmup=2,
    num_cooldown=1,
    num_cooldown_cancelled=1,
    num_sent=7,
    usage_missing=0,
    client_token_mismatches=1,
)
ENGINE = SimEngineFigures(
    prefix_hit_rate=0.5,
    preemptions=2,
    kv_blocks=100,
    kv_tokens=1600,
    step_time_breakdown=StepBreakdown(10, 2.0, 1.0, 0.5, 0.25, 0.25),
    kv_warning="the KV cache holds fewer than 4 requests",
)
FLEET = FleetFigures(0.25, 1, 3, 0.125, 2, 0.5, 1, 1, 2)
SCRAPED = ScrapedEngineFigures(8, 0.75, 0.5, 3.0, 16.0, None, 0.0)


def summary(**figures: object) -> Summary:
    return run_summary(
        LATENCY,
        num_completed=3,
        num_errors=1,
        errors_by_kind={"http_5xx": 1},
        itl_ms=Distribution.of([]),
        slo_attainment=ATTAINMENT,
        **figures,
    )


def test_every_kind_of_run_reads_back_from_its_json() -> None:
    for s in (
        summary(),
        summary(load=LOAD),
        summary(engine=ENGINE, queue_growth=0.125),
        summary(fleet=FLEET),
        summary(queue_growth=0.0, scraped=SCRAPED),
    ):
        assert Summary.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_the_json_keeps_its_flat_keys_in_their_order() -> None:
    d = summary(queue_growth=0.5, scraped=SCRAPED).to_dict()
    assert list(d)[-10:] == [
        "slo_attainment",
        "slos_met",
        "queue_growth",
        "engine_samples",
        "engine_kv_usage_max",
        "engine_kv_usage_mean",
        "engine_waiting_max",
        "engine_running_max",
        "engine_prefix_hit_rate",
        "engine_preemptions",
    ]
    bench = summary(load=LOAD).to_dict()
    assert bench["target_rate"] == "inf"
    assert bench["send_lag_ms"] == {"p50": 0.5, "p99": 2.0, "max": 3.5}
    assert bench["slo_attainment"][0]["value"] == 250.0
    assert bench["ttft_ms"] == {
        "mean": 120.5,
        "p50": 100.0,
        "p90": 110.0,
        "p95": 115.0,
        "p99": 125.0,
        "p99.9": 130.0,
        "std": 4.25,
        "count": 3,
    }


def test_a_bench_summary_stored_before_the_sent_and_cancelled_counts_still_reads() -> None:
    stored = {
        "duration_s": 10.0,
        "num_requests": 2,
        "num_completed": 2,
        "num_errors": 0,
        "errors_by_kind": {},
        "ttft_ms": {"mean": 20.0, "p50": 20.0, "p99": 25.0, "count": 2},
        "itl_ms": {"mean": None, "count": 0},
        "tpot_ms": {"mean": 5.0, "p50": 5.0, "p99": 6.0, "count": 2},
        "e2e_ms": {"mean": 90.0, "p50": 90.0, "p99": 95.0, "count": 2},
        "request_throughput": 0.2,
        "output_token_throughput": 4.0,
        "input_token_throughput": 8.0,
        "total_input_tokens": 80,
        "total_output_tokens": 40,
        "goodput": 0.2,
        "slo_attainment": [
            {
                "name": "ttft-p99",
                "spec": "ttft:p99<=500ms",
                "attainment": 1.0,
                "objective": 0.99,
                "met": True,
                "value": 25.0,
                "unit": "ms",
                "event": "request",
                "num_good": 2,
                "num_total": 2,
            }
        ],
        "slos_met": True,
        "target_rate": 0.2,
        "offered_rate": 0.2,
        "achieved_rate": None,
        "send_lag_ms": None,
        "num_warmup": 0,
        "num_cooldown": 0,
    }
    s = Summary.from_dict(stored)
    assert s.ttft_ms.p99 == 25.0 and s.ttft_ms.percentiles[90.0] is None
    assert s.load == LoadFigures(0.2, 0.2, None, None, 0, 0, 0, 0, 0, 0)
    assert s.engine is None and s.fleet is None and s.scraped is None
    assert s.slo_attainment[0].slo.name == "ttft-p99" and s.all_slos_met
    assert s.slo_attainment[0].value == 0.025
