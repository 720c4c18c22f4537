"""The read models behind the pages: batched grid reads agree with the one-series queries the
command line uses, and the SLO maths on literal buckets."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ui_seed import seed

from slotune.collector.alerts.evaluator import evaluate_all
from slotune.collector.metrics import summarize_metrics
from slotune.collector.store import (
    SampleIn,
    alert_history,
    list_bench_runs,
    list_slos,
    open_store,
    series_at,
    upgrade,
    write_samples,
)
from slotune.collector.views import fleet_table, slo_statuses
from slotune.collector.views.alerts import ackable, by_severity, severity_rank
from slotune.collector.views.bench import max_rate_curves
from slotune.collector.views.fleet import fleet_timeseries_by_target, outlier
from slotune.collector.views.slo_history import slo_history
from slotune.ui.app.tables import latency_unit, scale_latencies


def test_series_at_reads_every_series_on_the_grid_with_resets(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    with open_store(sqlite_url) as store:
        values = [(0.0, 1.0), (10.0, 5.0), (20.0, 2.0), (30.0, 4.0)]  # reset at 20 (from 5)
        write_samples(
            store, [SampleIn("a", "reqs", "counter", {"k": "v"}, ts, v) for ts, v in values]
        )
        write_samples(store, [SampleIn("b", "reqs", "counter", {}, 25.0, 7.0)])
        points = series_at(store, ["reqs"], [5.0, 15.0, 30.0])
        assert [(p.target, p.values, p.resets) for p in points] == [
            ("a", (1.0, 5.0, 4.0), (0.0, 0.0, 5.0)),
            ("b", (None, None, 7.0), (0.0, 0.0, 0.0)),
        ]
        assert points[0].labels == {"k": "v"}
        assert series_at(store, ["reqs"], [5.0], targets=["b"])[0].values == (None,)
        # a series first scraped inside the grid starts from its first sample there
        late = series_at(store, ["reqs"], [5.0, 30.0], targets=["b"], fill_first=True)
        assert late[0].values == (7.0, 7.0)


@pytest.mark.parametrize("window_s", [300.0, 3600.0])  # the seed holds the last 10 minutes
def test_fleet_table_agrees_with_metrics_summary(store_url: str, window_s: float) -> None:
    end = seed(store_url)
    with open_store(store_url) as store:
        table = fleet_table(store, end - window_s, end)
        cli = {s.target: s for s in summarize_metrics(store, window_s=window_s, end_ts=end)}
    for row in table.targets:
        mine, theirs = row.summary, cli[row.summary.target]
        for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
            for q in ("p50", "p90", "p99"):
                assert getattr(mine, metric)[q] == pytest.approx(getattr(theirs, metric)[q])
        for field in (
            "request_throughput",
            "output_token_throughput",
            "preemption_rate",
            "requests_running",
            "requests_waiting",
            "kv_usage",
            "vram_used_bytes",
            "power_watts",
            "is_up",
        ):
            assert getattr(mine, field) == pytest.approx(getattr(theirs, field)), field
    chat = next(r for r in table.pools if r.pool == "chat")
    assert chat.num_targets == 2
    # 2 targets x 2 req/s over the 600 s the seed covers, spread over the window
    assert chat.summary.request_throughput == pytest.approx(4.0 * min(window_s, 600) / window_s)


def test_slo_status_budget_and_burn_from_the_alert_maths(sqlite_url: str) -> None:
    end = seed(sqlite_url)
    with open_store(sqlite_url) as store:
        by_name = {s.slo.name: s for s in slo_statuses(store, end_ts=end)}
    chat, code = by_name["chat-ttft"], by_name["code-e2e"]
    assert chat.attainment == pytest.approx(0.995)
    assert chat.budget_left == pytest.approx(0.5)  # half of the 1 % allowed is spent
    assert chat.state.value == "met" and chat.firing == ()
    assert code.attainment == pytest.approx(0.85)
    assert code.burn_rates["1h"] == pytest.approx(1.5)
    assert code.state.value == "breached" and code.firing == ("ticket",)


def test_slo_budget_is_clamped_and_burn_rates_come_in_fast_slow_pairs(sqlite_url: str) -> None:
    end = seed(sqlite_url)
    with open_store(sqlite_url) as store:
        by_name = {s.slo.name: s for s in slo_statuses(store, end_ts=end)}
    code = by_name["code-e2e"]
    assert code.budget_left == pytest.approx(-0.5)  # the alert maths' raw figure
    assert code.budget_shown == 0.0 and code.overspent_by == pytest.approx(0.5)
    assert by_name["chat-ttft"].budget_shown == pytest.approx(0.5)
    pairs = {p.label: p for p in code.pairs}
    ticket = pairs["ticket 3d/6h >1×"]
    assert (ticket.long, ticket.short, ticket.factor) == ("3d", "6h", 1.0)
    assert ticket.long_rate == pytest.approx(1.5) and ticket.short_rate == pytest.approx(1.5)
    assert ticket.firing and not pairs["page 1h/5m >14.4×"].firing


def test_slo_history_burns_down_the_budget_and_gives_the_sli_per_step(sqlite_url: str) -> None:
    end = seed(sqlite_url)  # 10 minutes of samples before end
    with open_store(sqlite_url) as store:
        slos = {s.name: s for s in list_slos(store)}
        code = slo_history(store, replace(slos["code-e2e"], window_s=1200.0), end, points=4)
        chat = slo_history(store, replace(slos["chat-ttft"], window_s=1200.0), end, points=4)
    assert [p.ts for p in code.points] == [end - 900, end - 600, end - 300, end]
    assert code.step_s == 300.0 and code.start_ts == end - 1200
    # no request before the samples start; then the SLI of each 5-minute step
    assert [p.sli for p in chat.points[:2]] == [None, None]
    assert chat.points[2].sli == pytest.approx(0.995) and chat.points[3].sli == pytest.approx(0.995)
    assert chat.points[3].budget_left == pytest.approx(0.5)  # agrees with the SLO table
    assert all(p.budget_left == 0.0 for p in code.points[2:])  # overspent is clamped to 0
    assert code.points[3].sli == pytest.approx(0.85)


def test_max_rate_runs_form_one_curve(sqlite_url: str) -> None:
    seed(sqlite_url)
    with open_store(sqlite_url) as store:
        curves = max_rate_curves(list_bench_runs(store))
    assert [c.name for c in curves] == ["llama poisson"]
    assert [p.rate for p in curves[0].points] == [2.0, 4.0, 8.0]
    assert curves[0].max_rate == 4.0


def test_fleet_series_per_target_single_out_the_slow_replica(sqlite_url: str) -> None:
    end = seed(sqlite_url)
    names = ["node-1/vllm", "node-2/vllm", "node-3/vllm"]  # node-3 serves the slow pool
    with open_store(sqlite_url) as store:
        series = fleet_timeseries_by_target(store, names, end - 600, end, steps=6)
    assert list(series) == names and all(len(v) == 6 for v in series.values())
    assert [p.target for p in series["node-3/vllm"]] == ["node-3/vllm"] * 6
    waiting = {t: [p.requests_waiting for p in pts] for t, pts in series.items()}
    assert outlier(waiting) == "node-3/vllm"  # 3 waiting against 0 on its peers
    e2e = {t: [p.e2e_ms["p99"] for p in pts] for t, pts in series.items()}
    assert outlier(e2e) == "node-3/vllm"


def test_outlier_needs_a_clear_gap_and_peers() -> None:
    assert outlier({"a": [10.0, 11.0], "b": [10.5, None], "c": [30.0]}) == "c"
    assert outlier({"a": [10.0], "b": [12.0], "c": [11.0]}) is None  # within 1.5x
    assert outlier({"a": [10.0], "b": [None]}) is None  # one target with data
    assert outlier({}) is None


def test_latency_units_scale_to_seconds_and_missing_stays_blank() -> None:
    frame: list[dict[str, object]] = [{"ttft_p50": 157544.3, "itl_p50": 12.5}, {"ttft_p50": None}]
    units = scale_latencies(frame)
    assert units["ttft_p50"] == "s" and units["itl_p50"] == "ms"
    assert frame[0]["ttft_p50"] == pytest.approx(157.5443) and frame[1]["ttft_p50"] is None
    assert latency_unit([None, 999.0]) == ("ms", 1.0)


def test_only_alerts_firing_now_can_be_acknowledged(sqlite_url: str) -> None:
    end = seed(sqlite_url)
    with open_store(sqlite_url) as store:
        statuses = evaluate_all(store, end)
        history = alert_history(store, since_ts=end - 3600)
    # chat-ttft:page fired earlier but is ok now; code-e2e:ticket fires now
    assert [h.event.rule for h in ackable(history, statuses)] == ["code-e2e:ticket"]
    ordered = [(s.state.value, s.severity) for s in by_severity(statuses)]
    assert ordered[0] == ("firing", "ticket")
    assert [sev for _, sev in ordered[1:]] == sorted(
        (sev for _, sev in ordered[1:]), key=severity_rank
    )
