from __future__ import annotations

import math

import pytest
from alert_series import T0, histogram, steady

from slotune.collector.alerts.policy import SRE_WORKBOOK, burn_windows, error_budget
from slotune.collector.alerts.sli import Counts, SliReader, bench_counts
from slotune.collector.alerts.status import slo_status
from slotune.collector.errors import SLOSpecError
from slotune.collector.records import RequestRecord
from slotune.collector.slo import SLO, Selector, parse_slo
from slotune.collector.store import SampleIn, Store, register_target, write_samples


def test_counts_over_windows_with_a_counter_reset_and_a_gap(store: Store) -> None:
    register_target(store, "a", "vllm", "")
    points: list[tuple[float, dict[str, float]]] = [
        (T0, {"0.5": 0, "+Inf": 0}),
        (T0 + 10, {"0.5": 90, "+Inf": 100}),
        (T0 + 20, {"0.5": 180, "+Inf": 200}),
        # the engine restarts: counts start again from zero
        (T0 + 30, {"0.5": 5, "+Inf": 10}),
        # a gap of 30 s without scrapes
        (T0 + 60, {"0.5": 50, "+Inf": 100}),
    ]
    write_samples(store, histogram("a", "ttft", points))
    slo = parse_slo("ttft:p99<=500ms")
    read = SliReader(store, T0 + 60).counts(slo, [60.0, 40.0, 30.0])
    assert read.note is None
    # (T0, T0+60]: 180 good of 200 before the reset, then 50 of 100 after
    assert read.counts[0] == Counts(230.0, 300.0)
    # (T0+20, T0+60]: the reset keeps what came after it
    assert read.counts[1] == Counts(50.0, 100.0)
    # (T0+30, T0+60]
    assert read.counts[2] == Counts(45.0, 90.0)


def test_threshold_between_bounds_conservative_or_interpolated(store: Store) -> None:
    register_target(store, "a", "vllm", "")
    write_samples(
        store,
        histogram(
            "a",
            "ttft",
            [(T0, {"0.1": 0, "0.5": 0, "+Inf": 0}), (T0 + 10, {"0.1": 20, "0.5": 60, "+Inf": 100})],
        ),
    )
    slo = parse_slo("ttft:p99<=300ms")
    read = SliReader(store, T0 + 10).counts(slo, [10.0])
    assert read.counts[0] == Counts(20.0, 100.0)
    assert read.note is not None and not read.note.interpolated
    assert (read.note.lower, read.note.upper) == (0.1, 0.5)
    assert "nearest bounds 100ms and 500ms" in read.note.message(slo.name)
    interp = SLO(**{**{f: getattr(slo, f) for f in SLO.__slots__}, "interpolate": True})
    read = SliReader(store, T0 + 10).counts(interp, [10.0])
    assert read.counts[0] == Counts(40.0, 100.0)
    assert read.note is not None and read.note.interpolated


def test_availability_from_finished_reason(store: Store) -> None:
    register_target(store, "a", "vllm", "")
    rows = []
    for ts, stop, abort in ((T0, 0, 0), (T0 + 60, 97, 3)):
        for reason, v in (("stop", stop), ("length", 0), ("abort", abort)):
            rows.append(
                SampleIn("a", "requests_finished", "counter", {"finished_reason": reason}, ts, v)
            )
    write_samples(store, rows)
    read = SliReader(store, T0 + 60).counts(parse_slo("error_rate<=1%"), [60.0])
    assert read.counts[0] == Counts(97.0, 100.0)


def test_selector_picks_targets_by_pool(store: Store) -> None:
    steady(
        store, "a", start=T0, end=T0 + 60, step=10, good_per_step=10, bad_per_step=0, pool="chat"
    )
    steady(
        store, "b", start=T0, end=T0 + 60, step=10, good_per_step=0, bad_per_step=10, pool="batch"
    )
    slo = parse_slo("ttft:p99<=500ms", selector=Selector(pool="chat"))
    assert SliReader(store, T0 + 60).counts(slo, [60.0]).counts[0] == Counts(60.0, 60.0)
    everything = parse_slo("ttft:p99<=500ms")
    assert SliReader(store, T0 + 60).counts(everything, [60.0]).counts[0] == Counts(60.0, 120.0)


def test_burn_rates_and_the_page_condition(store: Store) -> None:
    # 30-day SLO at 99 %: two hours of 1 % errors, then 20 % errors for the last 10 minutes
    good, bad = steady(
        store, "a", start=T0, end=T0 + 7200, step=60, good_per_step=99, bad_per_step=1
    )
    end = T0 + 7200 + 600
    steady(
        store,
        "a",
        start=T0 + 7260,
        end=end,
        step=60,
        good_per_step=80,
        bad_per_step=20,
        base=(good + 99, bad + 1),
    )
    slo = parse_slo("ttft:p99<=500ms")
    status = slo_status(store, slo, end)
    rates = {b.window_s: b.burn_rate for b in status.burns}
    assert rates[300.0] == pytest.approx(20.0)  # 20 % errors / 1 % budget
    # 1h: 51 one-minute steps at 1 % errors, 9 at 20 %
    assert rates[3600.0] == pytest.approx((51 * 1 + 9 * 20) / 6000 / 0.01)
    page = next(c for c in status.conditions if c.window.long_s == 3600.0)
    assert page.short.burn_rate == pytest.approx(20.0)
    assert not page.is_firing  # 1h burns at 3.85 < 14.4
    # all the data lies inside 6h and 3d, which burn faster than 1: the slow ticket fires
    assert status.firing == ("ticket",)


def test_default_windows_scale_with_the_slo_window() -> None:
    slo = parse_slo("ttft:p99<=500ms", window_s=3 * 86400.0)
    windows = burn_windows(slo)
    assert [(w.long_s, w.short_s) for w in windows] == [
        (w.long_s / 10, w.short_s / 10) for w in SRE_WORKBOOK
    ]
    with pytest.raises(SLOSpecError, match="shorter than the scrape interval"):
        burn_windows(parse_slo("ttft:p99<=500ms", window_s=86400.0), min_window_s=15.0)


def test_objective_of_100_percent_has_no_budget() -> None:
    slo = SLO(name="x", sli=parse_slo("error_rate<=1%").sli, threshold=0.0, objective=1.0)
    with pytest.raises(SLOSpecError, match="no error budget"):
        error_budget(slo)


def test_bench_records_give_the_exact_per_request_sli() -> None:
    def rec(i: int, ttft: float, error: str | None = None) -> RequestRecord:
        return RequestRecord(str(i), 0.0, ttft, None if error else 1.0, error=error)

    records = [rec(0, 0.2), rec(1, 0.7), rec(2, 0.3, "timeout"), rec(3, 0.4)]
    assert bench_counts(parse_slo("ttft:p99<=500ms"), records) == Counts(2.0, 4.0)
    assert math.isclose(bench_counts(parse_slo("error_rate<=1%"), records).error_ratio or 0, 0.25)


def test_an_slo_without_budget_reports_its_attainment_only(store: Store) -> None:
    steady(store, "a", start=T0, end=T0 + 600, step=60, good_per_step=9, bad_per_step=1)
    slo = parse_slo("ttft:p99<=500ms", window_s=3600.0)
    perfect = SLO(**{**{f: getattr(slo, f) for f in SLO.__slots__}, "objective": 1.0})
    status = slo_status(store, perfect, T0 + 600)
    assert status.attainment == pytest.approx(0.9)
    assert status.budget_left is None and status.burns == () and status.conditions == ()
