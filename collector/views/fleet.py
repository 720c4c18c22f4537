"""The fleet: every target and every pool over a time range, and pooled time series.

Figures have the meaning of ``slotune metrics summary`` (:class:`TargetMetricsSummary`):
latency percentiles from histogram bucket increases, rates from counter increases, queue
length and VRAM at the end of the range. They are read on a grid of instants
(``series_at`` of the store or of a query API, :mod:`collector.metrics`), so gauge averages (KV usage, GPU utilisation, power) are means of the
grid's samples rather than of every sample, and a series that starts inside the range counts
from its first sample in it (as ``counter_increase`` does).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from slotune.collector.alerts.thresholds import STALE_S
from slotune.collector.errors import ConfigError
from slotune.collector.metrics import PromClient, metrics_reader
from slotune.collector.metrics.summary import LATENCIES, QUANTILES, TargetMetricsSummary
from slotune.collector.store import SeriesPoints, Store, TargetInfo, bucket_quantile

_COUNTERS = (
    "e2e_count",
    "requests_finished",
    "generation_tokens",
    "prompt_tokens",
    "preemptions",
    "prefix_queries",
    "prefix_hits",
)
# Gauges summed over a group's series (engines, GPUs) and those averaged over them.
_SUMMED = ("requests_running", "requests_waiting", "vram_used", "vram_total", "power_watts")
_AVERAGED = ("kv_usage", "gpu_utilization", "prefix_hit_rate", "up")
SERIES_NAMES = (
    *(f"{h}_bucket" for h in LATENCIES),
    *_COUNTERS,
    *_SUMMED,
    *_AVERAGED,
)
# Gauges a table averages over its range; "up" is read at the end like the summed ones.
_AVERAGED_NAMES = ("kv_usage", "gpu_utilization", "prefix_hit_rate", "power_watts")
_TWO_POINT_NAMES = tuple(n for n in SERIES_NAMES if n not in _AVERAGED_NAMES)


def is_stale(last_seen_at: float | None, at_ts: float) -> bool:
    """Whether a target's last scrape is older than the stale window at ``at_ts`` (or it was
    never scraped): its newest ``up`` says nothing about now."""
    return last_seen_at is None or at_ts - last_seen_at > STALE_S


@dataclass(frozen=True, slots=True)
class FleetRow:
    """A target (or a pool, ``kind`` ``pool``) over the range, with where it sits."""

    summary: TargetMetricsSummary
    pool: str | None
    gpu: str | None
    num_targets: int
    last_seen_at: float | None


@dataclass(frozen=True, slots=True)
class FleetTable:
    """Targets and pools over ``[start_ts, end_ts]``."""

    start_ts: float
    end_ts: float
    targets: tuple[FleetRow, ...]
    pools: tuple[FleetRow, ...]


def _grid(start_ts: float, end_ts: float, steps: int) -> list[float]:
    if not end_ts > start_ts:
        raise ConfigError(f"the time range must end after it starts ({start_ts} .. {end_ts})")
    if steps < 1:
        raise ConfigError(f"steps must be at least 1, got {steps}")
    width = (end_ts - start_ts) / steps
    return [start_ts + i * width for i in range(steps)] + [end_ts]


def _increase(p: SeriesPoints, a: int, b: int) -> float | None:
    """Reset-aware increase between grid points a and b (None: no sample by b)."""
    total, seen = 0.0, False
    for i in range(a + 1, b + 1):
        prev, cur = p.values[i - 1], p.values[i]
        if cur is None:
            continue
        seen = True
        if prev is not None:
            total += cur - prev + p.resets[i]
    return total if seen else None


def _sum_increase(points: Iterable[SeriesPoints], a: int, b: int) -> float | None:
    values = [v for p in points if (v := _increase(p, a, b)) is not None]
    return sum(values) if values else None


def _gauge(points: Sequence[SeriesPoints], i: int, summed: bool) -> float | None:
    values = [p.values[i] for p in points if p.values[i] is not None]
    if not values:
        return None
    total = float(sum(v for v in values if v is not None))
    return total if summed else total / len(values)


def _gauge_mean(points: Sequence[SeriesPoints], a: int, b: int, summed: bool) -> float | None:
    values = [v for i in range(a, b + 1) if (v := _gauge(points, i, summed)) is not None]
    return sum(values) / len(values) if values else None


def _stats(
    name: str,
    kind: str,
    node: str | None,
    model: str | None,
    points: Sequence[SeriesPoints],
    grid: Sequence[float],
    a: int,
    b: int,
) -> TargetMetricsSummary:
    """The summary of a group of series between grid points a and b."""
    by_name: dict[str, list[SeriesPoints]] = defaultdict(list)
    for p in points:
        by_name[p.name].append(p)
    span = grid[b] - grid[a]

    def quantiles(family: str) -> dict[str, float | None]:
        per_le: dict[float, float] = defaultdict(float)
        for p in by_name[f"{family}_bucket"]:
            le, inc = _le(p), _increase(p, a, b)
            if le is not None and inc is not None:
                per_le[le] += inc
        buckets = sorted(per_le.items())
        return {
            key: None if (v := bucket_quantile(q, buckets)) is None else v * 1000.0
            for key, q in QUANTILES.items()
        }

    def rate(series: str) -> float | None:
        inc = _sum_increase(by_name[series], a, b)
        return None if inc is None or span <= 0 else inc / span

    queries = _sum_increase(by_name["prefix_queries"], a, b)
    hits = _sum_increase(by_name["prefix_hits"], a, b)
    hit_rate = (
        hits / queries
        if queries and hits is not None
        else _gauge_mean(by_name["prefix_hit_rate"], a, b, summed=False)
    )
    requests = rate("e2e_count")
    up = _gauge(by_name["up"], b, summed=False)
    return TargetMetricsSummary(
        target=name,
        kind=kind,
        node=node,
        model=model,
        window_s=span,
        end_ts=grid[b],
        is_up=None if up is None else up >= 1.0,
        ttft_ms=quantiles("ttft"),
        itl_ms=quantiles("itl"),
        tpot_ms=quantiles("tpot"),
        e2e_ms=quantiles("e2e"),
        request_throughput=requests if requests is not None else rate("requests_finished"),
        output_token_throughput=rate("generation_tokens"),
        input_token_throughput=rate("prompt_tokens"),
        requests_running=_gauge(by_name["requests_running"], b, summed=True),
        requests_waiting=_gauge(by_name["requests_waiting"], b, summed=True),
        kv_usage=_gauge_mean(by_name["kv_usage"], a, b, summed=False),
        prefix_hit_rate=hit_rate,
        preemption_rate=rate("preemptions"),
        vram_used_bytes=_gauge(by_name["vram_used"], b, summed=True),
        vram_total_bytes=_gauge(by_name["vram_total"], b, summed=True),
        gpu_utilization=_gauge_mean(by_name["gpu_utilization"], a, b, summed=False),
        power_watts=_gauge_mean(by_name["power_watts"], a, b, summed=True),
    )


def _le(p: SeriesPoints) -> float | None:
    try:
        return float(p.labels.get("le", "nan"))
    except ValueError:
        return None


def _collapse(p: SeriesPoints) -> SeriesPoints:
    """A gauge read on a grid as a two-point series holding its mean at both ends."""
    known = [v for v in p.values if v is not None]
    mean = sum(known) / len(known) if known else None
    return SeriesPoints(p.target, p.name, p.labels, (mean, mean), (0.0, 0.0))


def gpu_of(t: TargetInfo) -> str | None:
    """The GPU a target runs on, from its labels (``gpu`` or DCGM's ``modelName``)."""
    return t.labels.get("gpu") or t.labels.get("modelName") or None


def fleet_table(
    store: Store,
    start_ts: float,
    end_ts: float,
    *,
    steps: int = 12,
    pool: str | None = None,
    metrics: PromClient | None = None,
) -> FleetTable:
    """Every target and every pool over a range.

    Args:
        store: the open store.
        metrics: read the targets from this query API (``--metrics``) instead of the store.
        start_ts: range start, epoch seconds.
        end_ts: range end, epoch seconds.
        steps: grid steps for the averaged gauges (KV usage, GPU utilisation, power,
            prefix hit rate).
        pool: only the targets of this pool.

    Raises:
        ConfigError: an empty range.
    """
    reader = metrics_reader(store, metrics)
    targets = [t for t in reader.targets(end_ts) if pool is None or t.pool == pool]
    names = [t.name for t in targets]
    # Increases and end values need the range's two ends; only averaged gauges need the grid
    # (a tenth of the series, so the table costs a fifth of the lookups of a full grid).
    grid = [start_ts, end_ts]
    points = reader.series_at(_TWO_POINT_NAMES, grid, names, fill_first=True) if targets else []
    if targets:
        fine = _grid(start_ts, end_ts, steps)
        points += [_collapse(p) for p in reader.series_at(_AVERAGED_NAMES, fine, names)]
    by_target: dict[str, list[SeriesPoints]] = defaultdict(list)
    for p in points:
        by_target[p.target].append(p)
    last = 1
    rows = tuple(
        FleetRow(
            _fresh(_stats(t.name, t.kind, t.node, t.model, by_target[t.name], grid, 0, last), t),
            t.pool,
            gpu_of(t),
            1,
            t.last_seen_at,
        )
        for t in targets
    )
    pools: dict[str, list[TargetInfo]] = defaultdict(list)
    for t in targets:
        pools[t.pool or "(no pool)"].append(t)
    pool_rows = tuple(
        FleetRow(
            _stats(
                name,
                "pool",
                None,
                _common(t.model for t in members),
                [p for t in members for p in by_target[t.name]],
                grid,
                0,
                last,
            ),
            name,
            _common(gpu_of(t) for t in members),
            len(members),
            max((t.last_seen_at for t in members if t.last_seen_at), default=None),
        )
        for name, members in sorted(pools.items())
    )
    return FleetTable(start_ts, end_ts, rows, pool_rows)


def _common(values: Iterable[str | None]) -> str | None:
    distinct = {v for v in values if v}
    if not distinct:
        return None
    return distinct.pop() if len(distinct) == 1 else "mixed"


def fleet_timeseries_by_target(
    store: Store,
    targets: Sequence[str],
    start_ts: float,
    end_ts: float,
    *,
    steps: int = 30,
    metrics: PromClient | None = None,
) -> dict[str, list[TargetMetricsSummary]]:
    """Each target's figures per step of a range, from one batched read, so a bad replica
    stands out instead of being averaged into its pool.

    Raises:
        ConfigError: an empty range or no target given.
    """
    if not targets:
        raise ConfigError("pick at least one target or pool to chart")
    grid = _grid(start_ts, end_ts, steps)
    by_target: dict[str, list[SeriesPoints]] = defaultdict(list)
    for p in metrics_reader(store, metrics).series_at(SERIES_NAMES, grid, list(targets)):
        by_target[p.target].append(p)
    return {
        t: [
            _stats(t, "series", None, None, by_target[t], grid, i - 1, i)
            for i in range(1, len(grid))
        ]
        for t in targets
    }


OUTLIER_RATIO = 1.5  # how far from its peers' median a target's mean must be to stand out


def outlier(series: Mapping[str, Sequence[float | None]]) -> str | None:
    """The target whose mean over the range is farthest from the median of the others'
    means, when it is at least :data:`OUTLIER_RATIO` times above or below it (None: no
    such target, or fewer than two with data)."""
    means = {
        t: sum(known) / len(known)
        for t, values in series.items()
        if (known := [v for v in values if v is not None])
    }
    best, best_ratio = None, OUTLIER_RATIO
    for t, mean in means.items():
        others = [m for o, m in means.items() if o != t]
        if not others:
            return None
        median = statistics.median(others)
        if median <= 0 or mean <= 0:
            ratio = math.inf if max(median, mean) > 0 else 1.0
        else:
            ratio = max(mean / median, median / mean)
        if ratio >= best_ratio and ratio > 1.0:
            best, best_ratio = t, ratio
    return best


def _fresh(summary: TargetMetricsSummary, target: TargetInfo) -> TargetMetricsSummary:
    """A target whose last scrape is stale at the range's end is down, whatever its last
    ``up`` sample said."""
    if summary.is_up and is_stale(target.last_seen_at, summary.end_ts):
        return dataclasses.replace(summary, is_up=False)
    return summary
