from __future__ import annotations

from dataclasses import replace

import pytest

from slotune.collector.errors import ConfigError
from slotune.collector.records import RequestRecord
from slotune.collector.slo import Alerting, BurnWindow, Selector, parse_slo
from slotune.collector.store import (
    AlertEventInfo,
    AlertRuleInfo,
    AlertState,
    BenchRunMeta,
    Store,
    StudyInfo,
    StudyStatus,
    delete_slo,
    get_study,
    list_alert_events,
    list_bench_runs,
    list_diagnoses,
    list_slos,
    list_studies,
    load_bench_run,
    record_alert_event,
    save_alert_rule,
    save_bench_run,
    save_diagnosis,
    save_slos,
    save_study,
)

RECORDS = [
    RequestRecord(
        "r1",
        10.0,
        10.2,
        11.0,
        (10.2, 10.5, 11.0),
        (1, 2, 0),
        512,
        3,
        scheduled_s=9.99,
        http_status=200,
    ),
    RequestRecord(
        "r0",
        10.1,
        None,
        None,
        (),
        (),
        100,
        None,
        error="http_5xx",
        error_detail="503 Service Unavailable",
        http_status=503,
        scheduled_s=10.1,
    ),
]


def test_bench_run_round_trip(store: Store) -> None:
    meta = BenchRunMeta(
        name="chat",
        url="http://127.0.0.1:8000/v1",
        model="llama",
        workload="azure-conv",
        started_at=100.0,
        ended_at=160.0,
        config={"rate": 5.0, "arrival": "poisson"},
    )
    run_id = save_bench_run(store, meta, RECORDS, {"goodput": 1.5})
    data = load_bench_run(store, run_id)
    assert data.meta == meta
    assert list(data.records) == RECORDS  # saved order, every field
    assert data.summary == {"goodput": 1.5}
    [info] = list_bench_runs(store)
    assert (info.run_id, info.num_requests) == (run_id, 2)
    with pytest.raises(ConfigError, match="no benchmark run with id 999"):
        load_bench_run(store, 999)


def test_duplicate_request_ids_store_nothing(store: Store) -> None:
    meta = BenchRunMeta("x", "u", "m", "w", 0.0)
    with pytest.raises(ConfigError, match="unique"):
        save_bench_run(store, meta, [RECORDS[0], RECORDS[0]], {})
    assert list_bench_runs(store) == []


def test_slos_upsert_by_name_and_delete(store: Store) -> None:
    chat = parse_slo("ttft:p99<=500ms", name="chat-ttft", selector=Selector(model="llama"))
    save_slos(store, [chat, parse_slo("error_rate<=1%")])
    stricter = parse_slo("ttft:p99<=300ms", name="chat-ttft", window_s=86400.0)
    save_slos(store, [stricter])
    assert list_slos(store) == [stricter, parse_slo("error_rate<=1%")]
    delete_slo(store, "error-rate")
    with pytest.raises(ConfigError, match="no SLO named 'error-rate'"):
        delete_slo(store, "error-rate")
    assert [s.name for s in list_slos(store)] == ["chat-ttft"]


def test_an_slo_is_stored_whole(store: Store) -> None:
    alerting = Alerting(
        enabled=False, windows=(BurnWindow("page", 3600.0, 300.0, 14.4),), labels={"team": "a"}
    )
    slo = replace(parse_slo("ttft:p99<=300ms"), interpolate=True, alerting=alerting)
    save_slos(store, [slo])
    assert list_slos(store) == [slo]


def test_saving_slos_is_all_or_nothing(store: Store) -> None:
    save_slos(store, [parse_slo("itl:p95<=50ms")])
    with pytest.raises(ConfigError, match="share a name"):
        save_slos(store, [parse_slo("ttft:p99<=1s"), parse_slo("ttft:p99<=2s")])
    assert [s.spec for s in list_slos(store)] == ["itl:p95<=50ms"]


def test_studies(store: Store) -> None:
    info = StudyInfo(
        name="s1",
        backend="sim",
        engine="vllm",
        model="llama-3.1-8b",
        gpu="H100",
        workload="azure-conv",
        objective="goodput",
        slos=("ttft-p99",),
        created_at=5.0,
    )
    save_study(store, info)
    done = StudyInfo(
        **{
            **{f: getattr(info, f) for f in info.__slots__},
            "status": StudyStatus.COMPLETE,
            "result": {"best": {"max_num_seqs": 64}},
        }
    )
    save_study(store, done)
    assert get_study(store, "s1") == done
    assert list_studies(store) == [done]
    assert get_study(store, "nope") is None
    bad = StudyInfo(**{**{f: getattr(info, f) for f in info.__slots__}, "status": "paused"})
    with pytest.raises(ConfigError, match="status 'paused' is unknown"):
        save_study(store, bad)


def test_diagnoses(store: Store) -> None:
    first = save_diagnosis(store, "prefix-cache", {"trace": "azure-conv"}, {"hit_rate": 0.4})
    second = save_diagnosis(store, "gpu-time", {"file": "t.json"}, {"compute": 0.7}, "node-1")
    assert [d.id for d in list_diagnoses(store)] == [second, first]
    [gpu] = list_diagnoses(store, kind="gpu-time")
    assert (gpu.subject, gpu.inputs, gpu.result) == ("node-1", {"file": "t.json"}, {"compute": 0.7})


def test_alert_events(store: Store) -> None:
    save_alert_rule(store, AlertRuleInfo(name="ttft-burn", kind="slo_burn", slo_name="chat"))
    record_alert_event(store, AlertEventInfo("ttft-burn", AlertState.FIRING, 100.0, 14.4))
    record_alert_event(store, AlertEventInfo("ttft-burn", AlertState.RESOLVED, 200.0, 0.5))
    events = list_alert_events(store, rule="ttft-burn")
    assert [(e.state, e.ts, e.value) for e in events] == [
        ("firing", 100.0, 14.4),
        ("resolved", 200.0, 0.5),
    ]
    assert len(list_alert_events(store, since_ts=150.0)) == 1
    with pytest.raises(ConfigError, match="no alert rule named 'x'"):
        record_alert_event(store, AlertEventInfo("x", AlertState.FIRING, 1.0))
