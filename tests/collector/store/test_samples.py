from __future__ import annotations

import pytest

from slotune.collector.errors import ConfigError
from slotune.collector.store import (
    SampleIn,
    Store,
    bucket_quantile,
    counter_increase,
    counter_rate,
    gauge_avg,
    histogram_quantile,
    latest_value,
    list_targets,
    register_target,
    write_samples,
)

T0 = 1_700_000_000.0
LES = ("0.1", "0.5", "1", "+Inf")


def histogram(
    target: str, ts: float, cumulative: tuple[float, ...], labels: dict[str, str] | None = None
) -> list[SampleIn]:
    """One scrape of family ``ttft``: cumulative bucket counts for LES, plus _count."""
    base = labels or {}
    out = [
        SampleIn(target, "ttft_bucket", "histogram", {**base, "le": le}, ts, c)
        for le, c in zip(LES, cumulative, strict=True)
    ]
    out.append(SampleIn(target, "ttft_count", "histogram", base, ts, cumulative[-1]))
    return out


def counter(ts_values: list[tuple[float, float]], target: str = "e1") -> list[SampleIn]:
    return [
        SampleIn(target, "reqs_total", "counter", {"model": "m"}, T0 + t, v) for t, v in ts_values
    ]


def test_replayed_batch_is_ignored(store: Store) -> None:
    batch = counter([(0, 1), (5, 2), (10, 4)])
    assert write_samples(store, batch) == 3
    assert write_samples(store, batch) == 0
    assert counter_increase(store, "e1", "reqs_total", T0, T0 + 10) == 3.0


def test_counter_increase_handles_resets(store: Store) -> None:
    # 10 -> 30 (+20), restart to 5 (+5), 25 (+20), restart to 0 (+0), 7 (+7)
    write_samples(store, counter([(0, 10), (5, 30), (10, 5), (15, 25), (20, 0), (25, 7)]))
    assert counter_increase(store, "e1", "reqs_total", T0, T0 + 25) == 52.0
    assert counter_increase(store, "e1", "reqs_total", T0 + 5, T0 + 15) == 25.0
    assert counter_rate(store, "e1", "reqs_total", T0, T0 + 25) == pytest.approx(52 / 25)


def test_resets_survive_a_fresh_writer_and_out_of_order_replay(
    store_url: str, store: Store
) -> None:
    from slotune.collector.store import open_store

    samples = counter([(0, 10), (5, 30), (10, 5), (15, 25), (20, 0), (25, 7)])
    write_samples(store, samples[3:])  # the newest samples arrive first
    with open_store(store_url) as other:  # a second writer with a cold cache
        write_samples(other, samples[:3])  # the spooled older samples arrive late
        write_samples(other, samples)  # and again: nothing changes
    assert counter_increase(store, "e1", "reqs_total", T0, T0 + 25) == 52.0


def test_histogram_quantile_from_bucket_deltas(store: Store) -> None:
    # Window (T0, T0+10]: bucket increases 0.1:4, 0.5:8, 1:10, +Inf:10.
    write_samples(
        store, histogram("e1", T0, (2, 3, 5, 6)) + histogram("e1", T0 + 10, (6, 11, 15, 16))
    )
    # p50: rank 5 in (0.1, 0.5] holding 4 -> 0.1 + 0.4 * (1/4)
    assert histogram_quantile(store, "e1", "ttft", 0.5, T0, T0 + 10) == pytest.approx(0.2)
    # p90: rank 9 in (0.5, 1] holding 2 -> 0.5 + 0.5 * (1/2)
    assert histogram_quantile(store, "e1", "ttft", 0.9, T0, T0 + 10) == pytest.approx(0.75)
    # no new observations in a later window
    assert histogram_quantile(store, "e1", "ttft", 0.5, T0 + 10, T0 + 20) is None


def test_histogram_quantile_across_an_engine_restart(store: Store) -> None:
    scrapes = [(0, (0, 0, 0, 0)), (5, (10, 10, 10, 10)), (10, (1, 3, 3, 4))]
    for t, counts in scrapes:
        write_samples(store, histogram("e1", T0 + t, counts))
    # increases: 0.1: 10+1=11, 0.5: 10+3=13, 1: 13, +Inf: 14 -> p95 rank 13.3 in +Inf bucket
    assert histogram_quantile(store, "e1", "ttft", 0.95, T0, T0 + 10) == 1.0
    # p50: rank 7 in (0, 0.1] holding 11 -> 0.1 * 7/11
    assert histogram_quantile(store, "e1", "ttft", 0.5, T0, T0 + 10) == pytest.approx(0.7 / 11)


def test_histogram_labels_select_and_sum(store: Store) -> None:
    write_samples(
        store,
        histogram("e1", T0, (0, 0, 0, 0), {"model": "a"})
        + histogram("e1", T0, (0, 0, 0, 0), {"model": "b"})
        + histogram("e1", T0 + 5, (4, 4, 4, 4), {"model": "a"})
        + histogram("e1", T0 + 5, (0, 0, 4, 4), {"model": "b"}),
    )
    assert histogram_quantile(
        store, "e1", "ttft", 0.5, T0, T0 + 5, {"model": "b"}
    ) == pytest.approx(0.75)
    # summed: 0.1:4, 0.5:4, 1:8 -> p75 rank 6 in (0.5, 1] -> 0.5 + 0.5 * 2/4
    assert histogram_quantile(store, "e1", "ttft", 0.75, T0, T0 + 5) == pytest.approx(0.75)
    assert histogram_quantile(store, "e1", "ttft", 0.5, T0, T0 + 5, {"model": "c"}) is None
    assert histogram_quantile(store, "nope", "ttft", 0.5, T0, T0 + 5) is None


def test_gauges_latest_and_average(store: Store) -> None:
    write_samples(
        store,
        [
            SampleIn("e1", "kv_usage", "gauge", {}, T0 + t, v)
            for t, v in [(0, 0.2), (5, 0.4), (10, 0.9)]
        ],
    )
    assert latest_value(store, "e1", "kv_usage") == 0.9
    assert latest_value(store, "e1", "kv_usage", at_ts=T0 + 7) == 0.4
    assert gauge_avg(store, "e1", "kv_usage", T0, T0 + 10) == pytest.approx(0.3)
    assert latest_value(store, "e1", "missing") is None


def test_targets_auto_registered_then_upserted(store: Store) -> None:
    write_samples(store, counter([(0, 1)], target="node-1/vllm"))
    [auto] = list_targets(store)
    assert (auto.name, auto.kind, auto.last_seen_at) == ("node-1/vllm", "unknown", T0)
    target_id = register_target(
        store,
        "node-1/vllm",
        "vllm",
        "http://127.0.0.1:8000/metrics",
        {"node": "node-1", "model": "llama", "zone": "a"},
    )
    [target] = list_targets(store)
    assert target.id == auto.id == target_id
    assert (target.kind, target.node, target.pool, target.model) == (
        "vllm",
        "node-1",
        None,
        "llama",
    )
    assert target.labels["zone"] == "a"


def test_bad_samples_store_nothing(store: Store) -> None:
    good = counter([(0, 1)])
    with pytest.raises(ConfigError, match="type 'histo' is unknown"):
        write_samples(store, [*good, SampleIn("e1", "x", "histo", {}, T0, 1.0)])
    with pytest.raises(ConfigError, match="window end"):
        histogram_quantile(store, "e1", "ttft", 0.5, T0, T0)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        histogram_quantile(store, "e1", "ttft", 99, T0, T0 + 1)
    assert counter_increase(store, "e1", "reqs_total", T0 - 1, T0 + 1) is None
    assert write_samples(store, good) == 1


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        (0.5, [(1.0, 10), (float("inf"), 10)], 0.5),
        (0.99, [(1.0, 10), (2.0, 10), (float("inf"), 20)], 2.0),  # rank in +Inf: second-highest
        (0.5, [(-1.0, 5), (0.0, 10), (float("inf"), 10)], -1.0),  # non-positive first bound
        (0.5, [(1.0, 5), (2.0, 4), (float("inf"), 10)], 1.0),  # non-monotonic counts are fixed
        (0.5, [(1.0, 0), (float("inf"), 0)], None),
        (0.5, [(1.0, 3), (2.0, 4)], None),  # no +Inf bucket
    ],
)
def test_bucket_quantile_matches_prometheus(
    q: float, buckets: list[tuple[float, float]], expected: float | None
) -> None:
    assert bucket_quantile(q, buckets) == (
        pytest.approx(expected) if expected is not None else None
    )
