"""SLIs as PromQL over the engines' own series, read from a Prometheus-compatible query API.

The same counts as :class:`~collector.alerts.sli.SliReader` reads from the store, with nothing
copied: good is ``sum by (le) (increase(F_bucket[w]))`` at the bound the same rule picks
(:func:`~collector.alerts.sli.nearest_bounds`, with its :class:`BoundaryNote`), total is the
``+Inf`` bucket's increase; availability sums the finished-request counters by
``finished_reason`` (an engine that counts failures apart, SGLang, adds them as ``abort``).
``F`` is every engine's name for the canonical histogram (:mod:`collector.metrics`), so a
fleet mixing engines reads as one. Prometheus extrapolates ``increase`` to the window's edges
when its samples do not reach them; good and total scale alike, so ratios and burn rates are
unchanged.

A round reads ahead (:meth:`PromSliReader.prefetch`): one query per (SLI, window) for all its
SLOs whose selectors name the same labels, summed ``by`` them (``job, instance`` for a
target, ``pool``, ``model_name``) and split per selector here, so a round of hundreds of SLOs
costs a few queries. What was not read ahead is read on first use, one query per (SLI,
selector, window), and cached. A query that fails raises
:class:`~collector.errors.MetricsUnavailable`; the evaluator reads that as no data for the
rule, never as ok.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from slotune.collector.alerts.sli import (
    BAD_REASONS,
    BoundaryNote,
    Counts,
    SliCounts,
    latency_counts,
    nearest_bounds,
)
from slotune.collector.metrics import (
    PromClient,
    Series,
    bucket_query,
    bucket_sums,
    outcome_counters,
    promql,
    raw_names,
)
from slotune.collector.slo import SLI, SLO, Selector

_Key = tuple[SLI, Selector, float]
_T = TypeVar("_T")
_NEWEST = -1.0  # the window of a newest-sample read: Prometheus' lookback


class PromSliReader:
    """Reads SLI counts at one evaluation time from a query API (the contract of
    :class:`~collector.alerts.sli.SliReader`)."""

    def __init__(self, client: PromClient, at_ts: float) -> None:
        self.client = client
        self.at_ts = at_ts
        self._buckets: dict[_Key, dict[float, float]] = {}
        self._outcomes: dict[_Key, Counts | None] = {}
        self._newest: dict[_Key, float | None] = {}

    def prefetch(self, needs: Iterable[tuple[SLO, Sequence[float]]]) -> None:
        """Read what the SLOs need, one query per (SLI, window, labels their selectors name).

        Raises:
            MetricsUnavailable: a query failed and the read-ahead stopped there (an API that
                is down costs one timeout here); what it did not read is read per SLO later,
                and fails there SLO by SLO if the API stays down.
        """
        plan: dict[tuple[SLI, float, tuple[str, ...]], dict[Selector, None]] = {}
        for slo, windows in needs:
            group = promql.group_labels(slo.selector)
            for w in {*windows, slo.window_s, _NEWEST}:
                todo = plan.setdefault((slo.sli, w, group), {})
                if not self._known((slo.sli, slo.selector, w)):
                    todo[slo.selector] = None
        for (sli, w, group), todo in plan.items():
            if todo:
                found = self.client.query(_query(sli, w, promql.any_of(todo), group), self.at_ts)
                self._keep(sli, w, list(todo), found)

    def counts(self, slo: SLO, windows: Sequence[float]) -> SliCounts:
        """Good / total of ``slo`` over each window ending at the reader's time (None: no
        series in the window).

        Raises:
            MetricsUnavailable: the query API cannot be read.
        """
        if slo.sli is SLI.ERROR_RATE:
            return SliCounts(tuple(self._availability(slo.selector, w) for w in windows))
        lower, upper, note = nearest_bounds(slo, self.bounds(slo))
        wanted = [
            b for b in (lower, upper if note and note.interpolated else None) if b is not None
        ]
        out = []
        for w in windows:
            inc = self._bucket_increases(slo.sli, slo.selector, w)
            sums = {b: inc.get(b) for b in (*wanted, math.inf)}
            out.append(latency_counts(slo, sums, lower, upper, note))
        return SliCounts(tuple(out), note)

    def bounds(self, slo: SLO) -> list[float]:
        """The finite bucket bounds of the SLO's histogram over its window (empty for
        error_rate)."""
        if slo.sli is SLI.ERROR_RATE:
            return []
        found = self._bucket_increases(slo.sli, slo.selector, slo.window_s)
        return sorted(b for b in found if not math.isinf(b))

    def note(self, slo: SLO) -> BoundaryNote | None:
        return None if slo.sli is SLI.ERROR_RATE else nearest_bounds(slo, self.bounds(slo))[2]

    def newest_ts(self, slo: SLO) -> float | None:
        """The newest sample time of the SLO's series within Prometheus' lookback (None:
        none)."""
        return self._read(self._newest, _newest, slo.sli, slo.selector, _NEWEST)

    def _bucket_increases(
        self, sli: SLI, selector: Selector, window_s: float
    ) -> dict[float, float]:
        """Increase per bucket bound (seconds) of every engine's histogram for the SLI."""
        return self._read(self._buckets, _buckets, sli, selector, window_s)

    def _availability(self, selector: Selector, window_s: float) -> Counts | None:
        return self._read(self._outcomes, _outcomes, SLI.ERROR_RATE, selector, window_s)

    def _read(
        self,
        cache: dict[_Key, _T],
        reduce: Callable[[SLI, Sequence[Series]], _T],
        sli: SLI,
        selector: Selector,
        window_s: float,
    ) -> _T:
        """One figure, from the round's read-ahead or else its own query."""
        key = (sli, selector, window_s)
        if key not in cache:
            matchers = promql.selector_matchers(selector)
            cache[key] = reduce(sli, self.client.query(_query(sli, window_s, matchers), self.at_ts))
        return cache[key]

    def _known(self, key: _Key) -> bool:
        return key in self._buckets or key in self._outcomes or key in self._newest

    def _keep(
        self, sli: SLI, window_s: float, selectors: Sequence[Selector], found: Sequence[Series]
    ) -> None:
        """Each selector's figure from one query's series summed by the labels they read."""
        groups = _Groups(found)
        for selector in selectors:
            key, kept = (sli, selector, window_s), groups.kept(selector)
            if window_s == _NEWEST:
                self._newest[key] = _newest(sli, kept)
            elif sli is SLI.ERROR_RATE:
                self._outcomes[key] = _outcomes(sli, kept)
            else:
                self._buckets[key] = _buckets(sli, kept)


class _Groups:
    """A grouped query's series, found by the selector that keeps them."""

    def __init__(self, found: Sequence[Series]) -> None:
        self.found = found
        self._by: dict[tuple[str, str], list[Series]] = {}
        for s in found:
            for label in ("instance", "pool", "model_name"):
                self._by.setdefault((label, s.labels.get(label, "")), []).append(s)

    def kept(self, selector: Selector) -> list[Series]:
        if selector.target is not None:
            some = self._by.get(("instance", promql.split_target(selector.target)[1]), [])
        elif selector.pool is not None:
            some = self._by.get(("pool", selector.pool), [])
        elif selector.model is not None:
            some = self._by.get(("model_name", selector.model), [])
        else:
            some = list(self.found)
        return [s for s in some if promql.keeps(selector, s.labels)]


def _query(sli: SLI, window_s: float, matchers: Sequence[str], group: Sequence[str] = ()) -> str:
    """The PromQL of one figure over the series the matchers keep, summed ``by`` ``group``."""
    if window_s == _NEWEST:
        return promql.newest_sample(_names(sli), matchers, group)
    if sli is not SLI.ERROR_RATE:
        return bucket_query(sli.value, matchers, window_s, group)
    w = promql.duration(window_s)
    by_reason = [o.finished for o in outcome_counters() if not o.failed]
    shape = f"sum {promql.by([*group, 'finished_reason'])} (increase({{}}[{w}]))"
    expr = promql.per_name(by_reason, [*matchers, 'finished_reason!=""'], shape)
    apart = [n for o in outcome_counters() if o.failed for n in (o.finished, o.failed)]
    if apart:
        shape = f"sum {promql.by(group)} (increase({{}}[{w}]))"
        expr += " or " + promql.per_name(apart, matchers, shape)
    return expr


def _names(sli: SLI) -> list[str]:
    """The raw series an SLI reads."""
    if sli is SLI.ERROR_RATE:
        return [n for o in outcome_counters() for n in (o.finished, o.failed) if n]
    return [f"{r.name}_bucket" for r in raw_names(sli.value)]


def _buckets(sli: SLI, found: Sequence[Series]) -> dict[float, float]:
    return bucket_sums(sli.value, found)


def _outcomes(sli: SLI, found: Sequence[Series]) -> Counts | None:
    """Good / total requests: by ``finished_reason``, or, for an engine that counts its
    failures apart, its failed counter's increase as bad (None: no series)."""
    failed = {o.failed for o in outcome_counters() if o.failed}
    total = bad = 0.0
    for s in found:
        total += s.value
        reason = s.labels.get("finished_reason")
        if reason is None:  # an engine's finished or failed counter, apart
            bad += s.value if s.labels.get(promql.SERIES_LABEL) in failed else 0.0
        elif reason in BAD_REASONS:
            bad += s.value
    return Counts(total - bad, total) if found else None


def _newest(sli: SLI, found: Sequence[Series]) -> float | None:
    return max((s.value for s in found), default=None)
