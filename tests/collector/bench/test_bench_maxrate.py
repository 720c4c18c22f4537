"""The max-rate search on measure functions whose threshold is known."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slotune.collector.bench.maxrate import find_max_rate
from slotune.collector.errors import ConfigError
from slotune.collector.records import RequestRecord
from slotune.collector.slo import parse_slos
from slotune.collector.summary import Summary, summarize

SLOS = parse_slos(["ttft:p90<=100ms"])


def _queue_like(threshold_rate: float) -> tuple[list[float], Callable[[float], Summary]]:
    """TTFT 50 ms below the threshold rate, 500 ms above it; records every call."""
    calls: list[float] = []

    def measure(rate: float) -> Summary:
        calls.append(rate)
        ttft = 0.05 if rate <= threshold_rate else 0.5
        records = [
            RequestRecord(
                f"r{i}",
                send_s=i,
                first_token_s=i + ttft,
                end_s=i + 1.0,
                chunk_times_s=(i + ttft, i + 1.0),
                chunk_tokens=(1, 1),
                output_tokens=2,
            )
            for i in range(20)
        ]
        return summarize(records, SLOS)

    return calls, measure


@pytest.mark.parametrize(("threshold", "start"), [(37.0, 1.0), (3.3, 10.0), (1.0, 1.0), (0.2, 5.0)])
def test_finds_the_known_threshold_within_tolerance(threshold: float, start: float) -> None:
    calls, measure = _queue_like(threshold)
    result = find_max_rate(measure, SLOS, start_rate=start, rel_tolerance=0.05, max_steps=30)
    assert result.converged
    assert threshold * 0.95 <= result.max_rate <= threshold
    good, bad = result.bracket
    assert bad is not None and good <= threshold < bad
    assert [p.rate for p in result.curve] == sorted(calls)
    assert all(p.all_met == (p.rate <= threshold) for p in result.curve)
    assert result.curve[0].summary.ttft_ms.count == 20


def test_nothing_passes_gives_zero() -> None:
    _, measure = _queue_like(0.0)
    result = find_max_rate(measure, SLOS, start_rate=1.0, max_steps=5)
    assert result.max_rate == 0.0 and not result.converged and len(result.curve) == 5


def test_step_budget_bounds_the_search() -> None:
    calls, measure = _queue_like(1e9)
    result = find_max_rate(measure, SLOS, start_rate=1.0, max_steps=6)
    assert len(calls) == 6 and result.bracket[1] is None and not result.converged
    assert result.max_rate == 32.0


def test_each_point_reports_attainment_per_slo() -> None:
    _, measure = _queue_like(4.0)
    points: list[float] = []
    result = find_max_rate(
        measure, SLOS, start_rate=2.0, max_steps=8, on_point=lambda p: points.append(p.rate)
    )
    assert points and len(points) == len(result.curve)
    above = [p for p in result.curve if p.rate > 4.0]
    assert above and all(p.attainment == {"ttft-p90": 0.0} for p in above)


def test_needs_slos_present_in_the_summary() -> None:
    _, measure = _queue_like(4.0)
    with pytest.raises(ConfigError, match="at least one --slo"):
        find_max_rate(measure, [])
    with pytest.raises(ConfigError, match="lacks SLO"):
        find_max_rate(measure, parse_slos(["e2e:p99<=1s"]))
