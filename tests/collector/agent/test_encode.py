"""Store samples from scrapes: unchanged cumulative values wait for the heartbeat."""

from __future__ import annotations

from collector.agent.base import Family, MetricType, Sample, Scrape
from collector.agent.encode import SampleEncoder


def scrape(counter: float, bucket: float, gauge: float) -> Scrape:
    return Scrape(
        raw=(Family("c", MetricType.COUNTER, (Sample("c_total", (("a", "1"),), counter),)),
             Family("h", MetricType.HISTOGRAM, (Sample("h_bucket", (("le", "+Inf"),), bucket),
                                                Sample("h_count", (), bucket))),
             Family("g", MetricType.GAUGE,
                    (Sample("g", (), gauge), Sample("n", (), float("nan"))))),
        canonical=())


def names(samples: list) -> list[str]:  # type: ignore[type-arg]
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
        "c_total", "g", "h_bucket", "h_count"]


def test_heartbeat_zero_writes_every_sample() -> None:
    enc = SampleEncoder(heartbeat_s=0)
    for ts in (1.0, 2.0):
        assert len(enc.encode("t", scrape(5, 2, 0.5), ts)) == 4
