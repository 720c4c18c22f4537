from __future__ import annotations

import pytest
from sqlalchemy import func, select

from slotune.collector.store import (
    AlertEventInfo,
    AlertRuleInfo,
    AlertState,
    SampleIn,
    Store,
    counter_increase,
    gauge_avg,
    histogram_quantile,
    latest_value,
    list_alert_events,
    prune,
    record_alert_event,
    rollup,
    save_alert_rule,
    vacuum,
    write_samples,
)
from slotune.collector.store._models import Sample

T0 = 1_700_000_040.0  # a minute boundary
LES = ("0.1", "1", "+Inf")


def ten_minutes_of_scrapes(store: Store) -> None:
    batch: list[SampleIn] = []
    requests = 0.0
    for i in range(120):  # 5-second scrapes
        ts = T0 + 5 * i
        requests = 3.0 if i == 70 else requests + 10.0  # an engine restart at i=70
        batch.append(SampleIn("e1", "reqs_total", "counter", {}, ts, requests))
        batch.append(SampleIn("e1", "kv_usage", "gauge", {}, ts, float(i % 10)))
        for le, share in zip(LES, (0.5, 0.9, 1.0), strict=True):
            batch.append(
                SampleIn("e1", "ttft_bucket", "histogram", {"le": le}, ts, requests * share)
            )
    write_samples(store, batch)


def count_samples(store: Store) -> int:
    with store.session() as session:
        return int(session.scalar(select(func.count()).select_from(Sample)) or 0)


def answers(store: Store) -> list[tuple[float | None, ...]]:
    # Counter windows end on kept samples (the last of each minute); gauge windows on steps.
    counters = [(T0 + 55, T0 + 595), (T0 + 115, T0 + 355), (T0 + 295, T0 + 595)]
    gauges = [(T0 + 60, T0 + 300), (T0, T0 + 540), (T0 + 300, T0 + 600)]
    return [
        (
            counter_increase(store, "e1", "reqs_total", a, b),
            histogram_quantile(store, "e1", "ttft", 0.95, a, b),
            gauge_avg(store, "e1", "kv_usage", c, d),
        )
        for (a, b), (c, d) in zip(counters, gauges, strict=True)
    ]


def test_rollup_keeps_window_answers(store: Store) -> None:
    ten_minutes_of_scrapes(store)
    before = answers(store)
    counts = rollup(store, older_than_s=1.0, step_s=60.0, now=T0 + 596)
    assert counts.samples == 5 * 9 * 11  # 5 series, 9 full minutes, 11 of 12 samples dropped
    assert counts.rollups == 9  # one gauge, 9 minutes
    assert count_samples(store) == 5 * (9 + 12)
    assert answers(store) == [pytest.approx(row) for row in before]
    assert latest_value(store, "e1", "kv_usage") == 9.0
    assert rollup(store, older_than_s=1.0, step_s=60.0, now=T0 + 596).samples == 0


def test_prune_deletes_old_telemetry_only(store: Store) -> None:
    ten_minutes_of_scrapes(store)
    save_alert_rule(
        store, AlertRuleInfo(name="r", kind="threshold", metric="kv_usage", op=">", threshold=0.9)
    )
    record_alert_event(store, AlertEventInfo("r", AlertState.FIRING, T0 + 10))
    record_alert_event(store, AlertEventInfo("r", AlertState.RESOLVED, T0 + 400))
    counts = prune(store, older_than_s=300.0, now=T0 + 600)
    assert counts.samples == 5 * 60 and counts.alert_events == 1
    assert counts.counter_resets == 0  # the restart at T0+350 is kept
    assert [e.state for e in list_alert_events(store)] == ["resolved"]
    assert counter_increase(store, "e1", "reqs_total", T0 + 300, T0 + 595) == pytest.approx(
        10 * 9 + 3 + 10 * 49
    )


def test_vacuum_gives_pruned_space_back(store: Store) -> None:
    write_samples(
        store,
        [SampleIn("e1", f"g{i % 50}", "gauge", {}, T0 + i, 0.5) for i in range(20_000)],
    )
    prune(store, older_than_s=1.0, now=T0 + 30_000)
    freed = vacuum(store)
    if store.is_sqlite:
        assert freed is not None and freed > 0  # the file shrank
        assert vacuum(store) == 0  # nothing left to give back
    else:
        assert freed is None
    assert latest_value(store, "e1", "g1", at_ts=T0 + 30_000) is None
