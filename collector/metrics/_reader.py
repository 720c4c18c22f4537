"""What a target did over a window, read through one contract from the store's samples or
from a query API: bucket increases, counter increases, newest values, gauge averages.

Names are canonical (``ttft``, ``generation_tokens``, ``kv_usage``; a histogram's request
count is ``e2e_count``). The store holds them as the agent mapped them; over a query API each
is the engines' own names (:func:`raw_names`), tried in the source's priority order with
``or`` so that an engine exporting an old and a new name is counted once, as the agent does.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from slotune.collector.agent.canonical import format_le
from slotune.collector.metrics import promql
from slotune.collector.metrics._client import PromClient, Series
from slotune.collector.metrics._names import RawName, outcome_counters, raw_names, spellings
from slotune.collector.slo import Selector
from slotune.collector.store import (
    SeriesPoints,
    Store,
    TargetInfo,
    counter_increase,
    gauge_avg,
    histogram_increases,
    latest_value,
    list_targets,
    parse_le,
    series_at,
)
from slotune.collector.vocabulary import SourceKind

LOOKBACK_S = 300.0
FINISHED = "requests_finished"  # Prometheus' default lookback: how old a newest value may be


class MetricsReader(Protocol):
    """Reads targets' canonical metrics; every method may raise ``MetricsUnavailable``."""

    def targets(self, at_ts: float) -> list[TargetInfo]:
        """The targets known at ``at_ts``, by name."""

    def bucket_increases(
        self, target: str, family: str, start_ts: float, end_ts: float
    ) -> dict[float, float]:
        """Increase of each bucket (seconds bound, cumulative) of a canonical histogram."""

    def increase(self, target: str, name: str, start_ts: float, end_ts: float) -> float | None:
        """Increase of a canonical counter (or ``<histogram>_count``); None without data."""

    def latest(self, target: str, name: str, at_ts: float) -> float | None:
        """Newest value of a canonical gauge, summed over the target's series."""

    def gauge_avg(self, target: str, name: str, start_ts: float, end_ts: float) -> float | None:
        """Mean of a canonical gauge over the window."""

    def series_at(
        self,
        names: Sequence[str],
        at_ts: Sequence[float],
        targets: Sequence[str] | None = None,
        *,
        fill_first: bool = False,
    ) -> list[SeriesPoints]:
        """Every series of the canonical ``names`` (``ttft_bucket``, ``kv_usage`` ...) on a
        grid, as :func:`collector.store.series_at` reads the store."""


class StoreMetrics:
    """The contract over the store's samples (what ``slotune agent`` wrote)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def targets(self, at_ts: float) -> list[TargetInfo]:
        return list_targets(self.store)

    def bucket_increases(
        self, target: str, family: str, start_ts: float, end_ts: float
    ) -> dict[float, float]:
        return histogram_increases(self.store, target, family, start_ts, end_ts)

    def increase(self, target: str, name: str, start_ts: float, end_ts: float) -> float | None:
        return counter_increase(self.store, target, name, start_ts, end_ts)

    def latest(self, target: str, name: str, at_ts: float) -> float | None:
        return latest_value(self.store, target, name, at_ts=at_ts)

    def gauge_avg(self, target: str, name: str, start_ts: float, end_ts: float) -> float | None:
        return gauge_avg(self.store, target, name, start_ts, end_ts)

    def series_at(
        self,
        names: Sequence[str],
        at_ts: Sequence[float],
        targets: Sequence[str] | None = None,
        *,
        fill_first: bool = False,
    ) -> list[SeriesPoints]:
        return series_at(self.store, names, at_ts, targets, fill_first=fill_first)


class PromMetrics:
    """The contract over a Prometheus-compatible query API; a target is ``job/instance``."""

    def __init__(self, client: PromClient) -> None:
        self.client = client

    def targets(self, at_ts: float) -> list[TargetInfo]:
        """Every (job, instance) with an engine or GPU series within the lookback, its kind
        from its metric names, ``pool`` and ``model`` from the labels a user relabels in."""
        seen: dict[str, TargetInfo] = {}
        for kind, prefix in kind_prefixes():
            expr = (
                "count by (job, instance, node, pool, model_name) "
                f"({{__name__=~{promql.quote(re.escape(prefix) + '.+')}}})"
            )
            for s in self.client.query(expr, at_ts):
                job, instance = s.labels.get("job", ""), s.labels.get("instance", "")
                name = f"{job}/{instance}" if job else instance
                if name in seen:
                    continue
                labels = {k: v for k, v in s.labels.items() if v}
                seen[name] = TargetInfo(
                    id=0,
                    name=name,
                    kind=kind,
                    url="",
                    labels=labels,
                    node=labels.get("node"),
                    pool=labels.get("pool"),
                    model=labels.get("model_name"),
                    created_at=at_ts,
                    last_seen_at=at_ts,
                )
        return [seen[n] for n in sorted(seen)]

    def bucket_increases(
        self, target: str, family: str, start_ts: float, end_ts: float
    ) -> dict[float, float]:
        return self.buckets(family, promql.target_matchers(target), end_ts - start_ts, end_ts)

    def buckets(
        self, family: str, matchers: Sequence[str], window_s: float, at_ts: float
    ) -> dict[float, float]:
        """Increase per bucket bound (seconds) of every engine's histogram for ``family``
        over the window ending at ``at_ts``, summed over the series the matchers keep."""
        found = self.client.query(bucket_query(family, matchers, window_s), at_ts)
        return bucket_sums(family, found)

    def increase(self, target: str, name: str, start_ts: float, end_ts: float) -> float | None:
        w = promql.duration(end_ts - start_ts)
        if name == FINISHED:  # finished and failed requests are apart in some engines: add up
            names = [n.name for n in _counters(name)]
            shape = f"sum(increase({{}}[{w}]))"
            found = self.client.query(
                promql.per_name(names, promql.target_matchers(target), shape), end_ts
            )
            return sum(s.value for s in found) if found else None
        return self._first(_counters(name), target, "sum(increase({}[" + w + "]))", end_ts)

    def latest(self, target: str, name: str, at_ts: float) -> float | None:
        names = _gauges(name)
        w = promql.duration(LOOKBACK_S)
        return self._first(names, target, "sum(last_over_time({}[" + w + "]))", at_ts)

    def gauge_avg(self, target: str, name: str, start_ts: float, end_ts: float) -> float | None:
        w = promql.duration(end_ts - start_ts)
        return self._first(_gauges(name), target, "avg(avg_over_time({}[" + w + "]))", end_ts)

    def series_at(
        self,
        names: Sequence[str],
        at_ts: Sequence[float],
        targets: Sequence[str] | None = None,
        *,
        fill_first: bool = False,
    ) -> list[SeriesPoints]:
        """The grid from one range query per name (the grid must be evenly spaced, as the
        fleet views' are). A value is the newest sample within the lookback. The API does not
        say what a counter held before a reset, so a counter that drops between two instants
        is read as reset just after the first (its increase is then the second value)."""
        grid = list(at_ts)
        wanted = None if targets is None else set(targets)
        matchers = [] if targets is None else promql.any_of(Selector(target=t) for t in targets)
        out: list[SeriesPoints] = []
        for name in dict.fromkeys(names):
            raws = _series_names(name)
            if not raws:
                continue
            found = self._grid_query(raws, matchers, grid)
            out.extend(_points(name, raws, found, grid, wanted, fill_first))
        return sorted(out, key=lambda p: (p.target, p.name, sorted(p.labels.items())))

    def _grid_query(
        self, raws: Sequence[RawName], matchers: Sequence[str], grid: Sequence[float]
    ) -> list[Series]:
        selector = promql.series([r.name for r in raws], matchers)
        if len(grid) == 1:
            return self.client.query(selector, grid[0])
        step = (grid[-1] - grid[0]) / (len(grid) - 1)
        return self.client.query_range(selector, grid[0], grid[-1], step)

    def _first(
        self, names: Sequence[RawName], target: str, shape: str, at_ts: float
    ) -> float | None:
        """``shape`` (``{}`` is the selector) over the first name that has data, scaled."""
        if not names:
            return None
        matchers = promql.target_matchers(target)
        terms = [
            shape.format(promql.series([n.name], matchers))
            + (f" * {n.scale!r}" if n.scale != 1.0 else "")
            for n in names
        ]
        found = self.client.query(" or ".join(terms), at_ts)
        return found[0].value if found else None


def bucket_query(
    family: str, matchers: Sequence[str], window_s: float, group: Sequence[str] = ()
) -> str:
    """The increase of every engine's buckets of ``family`` over the window, summed ``by``
    ``le`` and ``group``, each raw name apart (:func:`bucket_sums` adds them up)."""
    names = [f"{r.name}_bucket" for r in raw_names(family)]
    shape = f"sum {promql.by([*group, 'le'])} (increase({{}}[{promql.duration(window_s)}]))"
    return promql.per_name(names, matchers, shape)


def bucket_sums(family: str, found: Sequence[Series]) -> dict[float, float]:
    """Increase per bucket bound (seconds) from :func:`bucket_query`'s series (all of them,
    or the groups one selector keeps): of each engine the first raw name present."""
    raws = {f"{r.name}_bucket": r for r in raw_names(family)}
    chosen = _first_per_kind(raws, found)
    sums: dict[float, float] = {}
    for s in found:
        raw = chosen.get(s.labels.get(promql.SERIES_LABEL, ""))
        le = parse_le(s.labels.get("le"))
        if raw is not None and le is not None:
            sums[le * raw.scale] = sums.get(le * raw.scale, 0.0) + s.value
    return sums


def _first_per_kind(raws: Mapping[str, RawName], results: Sequence[Series]) -> dict[str, RawName]:
    """Of each kind's names that have data, the first (the source's priority): one engine's
    old and new names are alternatives, different engines' names add up."""
    present = {s.labels.get(promql.SERIES_LABEL, "") for s in results}
    chosen: dict[str, RawName] = {}
    for name, raw in raws.items():
        if name in present and raw.kind not in {r.kind for r in chosen.values()}:
            chosen[name] = raw
    return chosen


def _series_names(name: str) -> tuple[RawName, ...]:
    """The raw series of a canonical series name, in priority order."""
    family, _, suffix = name.rpartition("_")
    if suffix == "bucket" and raw_names(family):
        return tuple(RawName(f"{r.name}_bucket", r.scale) for r in raw_names(family))
    return _counters(name)


def _points(
    name: str,
    raws: Sequence[RawName],
    found: Sequence[Series],
    grid: Sequence[float],
    wanted: set[str] | None,
    fill_first: bool,
) -> list[SeriesPoints]:
    """Each target's series of its first raw name present, as canonical series on the grid."""
    rank = {r.name: i for i, r in enumerate(raws)}
    scale = {r.name: r.scale for r in raws}
    best: dict[str, int] = {}
    for s in found:
        target = _target_of(s.labels)
        i = rank.get(s.labels.get("__name__", ""), len(raws))
        best[target] = min(best.get(target, i), i)
    slot = {round(t, 3): i for i, t in enumerate(grid)}
    out = []
    for s in found:
        raw = s.labels.get("__name__", "")
        target = _target_of(s.labels)
        if wanted is not None and target not in wanted:
            continue
        if name != FINISHED and rank.get(raw) != best[target]:  # finished + failed add up
            continue
        k = scale[raw]
        values: list[float | None] = [None] * len(grid)
        for t, v in s.points:
            at = slot.get(round(t, 3))
            if at is not None:
                values[at] = v * k
        if fill_first and values[0] is None:
            values[0] = next((v for v in values if v is not None), None)
        resets = [0.0] + [
            p if p is not None and c is not None and c < p else 0.0
            for p, c in itertools.pairwise(values)
        ]
        labels = {a: b for a, b in s.labels.items() if a not in ("__name__", "job", "instance")}
        if "le" in labels and k != 1.0:
            le = parse_le(labels["le"])
            labels["le"] = labels["le"] if le is None else format_le(le * k)
        out.append(SeriesPoints(target, name, labels, tuple(values), tuple(resets)))
    return out


def _target_of(labels: Mapping[str, str]) -> str:
    job, instance = labels.get("job", ""), labels.get("instance", "")
    return f"{job}/{instance}" if job else instance


def kind_prefixes() -> list[tuple[str, str]]:
    """(kind, metric-name prefix) of every kind whose series name it, SGLang's both spellings."""
    return [
        (k.value, prefix)
        for k in SourceKind
        if k.federate_prefix
        for prefix in spellings(k.federate_prefix)
    ]


def _counters(name: str) -> tuple[RawName, ...]:
    """The raw counters of a canonical counter; ``<histogram>_count`` is the histogram's
    count; ``requests_finished`` every engine's finished and failed requests."""
    if name == FINISHED:
        return tuple(RawName(n) for o in outcome_counters() for n in (o.finished, o.failed) if n)
    family, _, suffix = name.rpartition("_")
    if suffix == "count" and raw_names(family):
        return tuple(RawName(f"{r.name}_count", 1.0, r.kind) for r in raw_names(family))
    if suffix == "sum" and raw_names(family):
        return tuple(RawName(f"{r.name}_sum", r.scale, r.kind) for r in raw_names(family))
    return raw_names(name) or (RawName(name),)


def _gauges(name: str) -> tuple[RawName, ...]:
    """The raw gauges of a canonical gauge; a name no source maps (``up``, a raw DCGM field)
    is read as it is."""
    return raw_names(name) or (RawName(name),)


def metrics_reader(store: Store, client: PromClient | None) -> MetricsReader:
    """The query API's reader when ``client`` is given (``--metrics``), else the store's."""
    return PromMetrics(client) if client is not None else StoreMetrics(store)


@dataclass(frozen=True, slots=True)
class TargetWindow:
    """What one target did over ``[start_ts, end_ts]``, in canonical names and units.

    Attributes:
        histograms: per latency family (``ttft``, ``itl``, ``tpot``, ``e2e``, ``queue_time``,
            ``prefill_time``, ``decode_time``), the increase of each bucket, (upper bound in
            seconds, cumulative count) sorted by bound, ending at ``+Inf``; absent without data.
        counters: increases of the request and token counters (``requests_finished``,
            ``prompt_tokens``, ``generation_tokens``, ``preemptions``, ``prefix_queries``,
            ``prefix_hits``); None without data.
        gauges: means over the window (``kv_usage``, ``requests_running``,
            ``requests_waiting``, ``gpu_utilization``, ``power_watts``); None without data.
    """

    target: str
    start_ts: float
    end_ts: float
    histograms: Mapping[str, tuple[tuple[float, float], ...]]
    counters: Mapping[str, float | None]
    gauges: Mapping[str, float | None]


WINDOW_HISTOGRAMS = ("ttft", "itl", "tpot", "e2e", "queue_time", "prefill_time", "decode_time")
WINDOW_COUNTERS = (
    FINISHED,
    "prompt_tokens",
    "generation_tokens",
    "preemptions",
    "prefix_queries",
    "prefix_hits",
)
WINDOW_GAUGES = (
    "kv_usage",
    "requests_running",
    "requests_waiting",
    "gpu_utilization",
    "power_watts",
)


def read_window(reader: MetricsReader, target: str, start_ts: float, end_ts: float) -> TargetWindow:
    """One target's histograms, counters and gauges over a window, from the store or a query
    API alike (``metrics_reader(store, client)``).

    Raises:
        ConfigError: an empty window.
        MetricsUnavailable: the query API cannot be read.
    """
    histograms = {}
    for family in WINDOW_HISTOGRAMS:
        buckets = reader.bucket_increases(target, family, start_ts, end_ts)
        if buckets:
            histograms[family] = tuple(sorted(buckets.items()))
    return TargetWindow(
        target,
        start_ts,
        end_ts,
        histograms,
        {c: reader.increase(target, c, start_ts, end_ts) for c in WINDOW_COUNTERS},
        {g: reader.gauge_avg(target, g, start_ts, end_ts) for g in WINDOW_GAUGES},
    )
