"""Two run summaries side by side: the figures that matter and their relative change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LATENCY_METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
LATENCY_STATS = ("mean", "p50", "p90", "p99")
RATE_METRICS = (
    "request_throughput",
    "output_token_throughput",
    "goodput",
    "offered_rate",
    "achieved_rate",
)
COUNT_METRICS = ("num_requests", "num_completed", "num_errors")


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """One figure of two runs; ``change`` is (b - a) / a, None when undefined."""

    metric: str
    a: float | None
    b: float | None
    change: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "a": self.a, "b": self.b, "change": self.change}


def compare_summaries(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[ComparisonRow]:
    """Rows for the latency percentiles, throughputs, goodput and counts of two summaries."""
    rows: list[ComparisonRow] = []
    for metric in LATENCY_METRICS:
        for stat in LATENCY_STATS:
            rows.append(_row(f"{metric}.{stat}", _get(a, metric, stat), _get(b, metric, stat)))
    for metric in (*RATE_METRICS, *COUNT_METRICS):
        rows.append(_row(metric, _num(a.get(metric)), _num(b.get(metric))))
    return rows


def _get(summary: Mapping[str, Any], metric: str, stat: str) -> float | None:
    block = summary.get(metric)
    return _num(block.get(stat)) if isinstance(block, Mapping) else None


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _row(metric: str, a: float | None, b: float | None) -> ComparisonRow:
    change = (b - a) / a if a is not None and b is not None and a != 0 else None
    return ComparisonRow(metric, a, b, change)
