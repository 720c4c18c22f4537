"""Store samples from scrapes: unchanged cumulative values wait for the heartbeat."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slotune.collector.agent.base import Family, MetricType, Sample, Scrape
from slotune.collector.agent.encode import SampleEncoder


def scrape(counter: float, bucket: float, gauge: float) -> Scrape:
    return Scrape(
        raw=(
            Family("c", MetricType.COUNTER, (Sample("c_total", (("a", "1"),), counter),)),
            Family(
                "h",
                MetricType.HISTOGRAM,
                (Sample("h_bucket", (("le", "+Inf"),), bucket), Sample("h_count", (), bucket)),
            ),
            Family("g", MetricType.GAUGE, (Sample("g", (), gauge), Sample("n", (), float("nan")))),
        ),
        canonical=(),
    )


def names(samples: list) -> list[str]:
    return sorted(s.name for s in samples)


def test_unchanged_cumulative_values_wait_for_the_heartbeat_gauges_never_do() -> None:
    enc = SampleEncoder(heartbeat_s=60.0)
    first = enc.encode("t", scrape(5, 2, 0.5), 100.0)
    assert names(first) == ["c_total", "g", "h_bucket", "h_count"]  # NaN left out
    assert first[0].type == "counter" and first[0].labels == {"a": "1"}
    assert names(enc.encode("t", scrape(5, 2, 0.5), 101.0)) == ["g"]
    assert names(enc.encode("t", scrape(6, 2, 0.5), 102.0)) == ["c_total", "g"]
    assert names(enc.encode("t", scrape(1, 2, 0.5), 103.0)) == ["c_total", "g"]  # a reset
    assert names(enc.encode("t", scrape(1, 2, 0.5), 161.0)) == ["g", "h_bucket", "h_count"]
    assert names(enc.encode("other", scrape(1, 2, 0.5), 161.0)) == [
        "c_total",
        "g",
        "h_bucket",
        "h_count",
    ]


def test_heartbeat_zero_writes_every_sample() -> None:
    enc = SampleEncoder(heartbeat_s=0)
    for ts in (1.0, 2.0):
        assert len(enc.encode("t", scrape(5, 2, 0.5), ts)) == 4


def _rows(samples: list) -> list[tuple]:
    return sorted((s.name, sorted(s.labels.items()), s.ts, s.value) for s in samples)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.integers(0, 2),
            st.sampled_from([0.5, 0.7]),
            st.sampled_from([1.0, 30.0, 59.0, 61.0]),
        ),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([0.0, 60.0]),
)
def test_reused_family_objects_encode_exactly_like_equal_copies(
    steps: list[tuple[int, int, float, float]], heartbeat_s: float
) -> None:
    # Sources hand back the very same Family objects when nothing changed; the encoder's
    # shortcut for them must write exactly what the per-sample path writes for equal copies.
    by_identity, by_value = SampleEncoder(heartbeat_s), SampleEncoder(heartbeat_s)
    previous: tuple[tuple[int, int, float], Scrape] | None = None
    ts = 1000.0
    for counter, bucket, gauge, step_s in steps:
        ts += step_s
        values = (counter, bucket, gauge)
        if previous is None or previous[0] != values:
            previous = (values, scrape(counter, bucket, gauge))
        assert _rows(by_identity.encode("t", previous[1], ts)) == _rows(
            by_value.encode("t", scrape(counter, bucket, gauge), ts)
        )
        assert by_identity.num_skipped == by_value.num_skipped
