"""The readers of ``collector.metrics`` (``metrics summary``, ``targets list``, the fleet and
overview pages) over the store and over a real Prometheus holding the same traffic."""

from __future__ import annotations

import pytest
from fleet_traffic import AT_TS

from slotune.collector.metrics import (
    PromClient,
    PromMetrics,
    StoreMetrics,
    read_window,
    summarize_metrics,
)
from slotune.collector.store import Store
from slotune.collector.views import fleet_table, overview

WINDOW_S = 1800.0


@pytest.mark.prometheus
@pytest.mark.slow
def test_targets_are_job_instance_pairs(filled: Store, prometheus: PromClient) -> None:
    prom = [(t.name, t.kind, t.model) for t in PromMetrics(prometheus).targets(AT_TS)]
    store = [(t.name, t.kind) for t in StoreMetrics(filled).targets(AT_TS)]
    assert [(n, k) for n, k, _ in prom] == store
    assert {m for _, _, m in prom} == {"m"}


@pytest.mark.prometheus
@pytest.mark.slow
def test_metrics_summary_agrees(filled: Store, prometheus: PromClient) -> None:
    def summaries(metrics: PromClient | None) -> dict[str, dict[str, object]]:
        got = summarize_metrics(filled, window_s=WINDOW_S, end_ts=AT_TS, metrics=metrics)
        return {s.target: s.to_dict() for s in got}

    sql, prom = summaries(None), summaries(prometheus)
    assert sorted(prom) == sorted(sql)
    for target, s in sql.items():
        p = prom[target]
        for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
            assert _same(p[key], s[key]), (target, key, p[key], s[key])
        assert p["request_throughput"] == pytest.approx(s["request_throughput"], rel=1e-9)
        assert p["requests_running"] == s["requests_running"]
        # avg_over_time includes the window's first sample, the store's mean does not
        assert _same({"kv": p["kv_usage"]}, {"kv": s["kv_usage"]}, rel=0.05)


@pytest.mark.prometheus
@pytest.mark.slow
def test_fleet_and_overview_pages_agree(filled: Store, prometheus: PromClient) -> None:
    sql = fleet_table(filled, AT_TS - WINDOW_S, AT_TS)
    prom = fleet_table(filled, AT_TS - WINDOW_S, AT_TS, metrics=prometheus)
    assert [r.summary.target for r in prom.targets] == [r.summary.target for r in sql.targets]
    for p, s in zip(prom.targets, sql.targets, strict=True):
        assert _same(p.summary.ttft_ms, s.summary.ttft_ms)
        assert p.summary.request_throughput == pytest.approx(s.summary.request_throughput)
    page = overview(filled, end_ts=AT_TS, metrics=prometheus)
    assert page.num_targets == 2


def _same(a: object, b: object, rel: float = 1e-9) -> bool:
    """Equal figures (None where neither has data)."""
    assert isinstance(a, dict) and isinstance(b, dict)
    return a.keys() == b.keys() and all(
        (a[k] is None) == (b[k] is None) and (a[k] is None or a[k] == pytest.approx(b[k], rel))
        for k in a
    )


@pytest.mark.prometheus
@pytest.mark.slow
def test_a_targets_window_reads_the_same_from_both(filled: Store, prometheus: PromClient) -> None:
    target = "vllm/127.0.0.1:8000"
    start = AT_TS - WINDOW_S
    sql = read_window(StoreMetrics(filled), target, start, AT_TS)
    prom = read_window(PromMetrics(prometheus), target, start, AT_TS)
    assert set(prom.histograms) == set(sql.histograms) == {"ttft", "itl", "tpot", "e2e"}
    for family, buckets in sql.histograms.items():
        assert dict(prom.histograms[family]) == pytest.approx(dict(buckets))
    assert prom.counters["requests_finished"] == pytest.approx(sql.counters["requests_finished"])
    assert _same(dict(prom.gauges), dict(sql.gauges), rel=0.05)
