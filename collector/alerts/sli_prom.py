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

Reads are cached per (metric, selector, window): the SLOs of one round that share them cost
one query. A query that fails raises :class:`~collector.errors.MetricsUnavailable`; the
evaluator reads that as no data for the rule, never as ok.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

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
    PromMetrics,
    outcome_counters,
    promql,
    raw_names,
)
from slotune.collector.slo import SLI, SLO, Selector

_Key = tuple[str, Selector, float]


class PromSliReader:
    """Reads SLI counts at one evaluation time from a query API (the contract of
    :class:`~collector.alerts.sli.SliReader`)."""

    def __init__(self, client: PromClient, at_ts: float) -> None:
        self.client = client
        self.metrics = PromMetrics(client)
        self.at_ts = at_ts
        self._buckets: dict[_Key, dict[float, float]] = {}
        self._outcomes: dict[_Key, Counts | None] = {}

    def prefetch(self, needs: Iterable[tuple[SLO, Sequence[float]]]) -> None:
        """Nothing to batch: each (metric, selector, window) is one query, cached on first use."""

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
            inc = self._bucket_increases(slo, w)
            sums = {b: inc.get(b) for b in (*wanted, math.inf)}
            out.append(latency_counts(slo, sums, lower, upper, note))
        return SliCounts(tuple(out), note)

    def bounds(self, slo: SLO) -> list[float]:
        """The finite bucket bounds of the SLO's histogram over its window (empty for
        error_rate)."""
        if slo.sli is SLI.ERROR_RATE:
            return []
        return sorted(b for b in self._bucket_increases(slo, slo.window_s) if not math.isinf(b))

    def note(self, slo: SLO) -> BoundaryNote | None:
        return None if slo.sli is SLI.ERROR_RATE else nearest_bounds(slo, self.bounds(slo))[2]

    def newest_ts(self, slo: SLO) -> float | None:
        """The newest sample time of the SLO's series within Prometheus' lookback (None:
        none)."""
        expr = promql.newest_sample(self._names(slo), promql.selector_matchers(slo.selector))
        found = self.client.query(expr, self.at_ts)
        return found[0].value if found else None

    def _names(self, slo: SLO) -> list[str]:
        if slo.sli is SLI.ERROR_RATE:
            return [n for o in outcome_counters() for n in (o.finished, o.failed) if n]
        return [f"{r.name}_bucket" for r in raw_names(slo.sli.value)]

    def _bucket_increases(self, slo: SLO, window_s: float) -> dict[float, float]:
        """Increase per bucket bound (seconds) of every engine's histogram for the SLO."""
        key = (slo.sli.value, slo.selector, window_s)
        if key not in self._buckets:
            matchers = promql.selector_matchers(slo.selector)
            self._buckets[key] = self.metrics.buckets(slo.sli.value, matchers, window_s, self.at_ts)
        return self._buckets[key]

    def _availability(self, selector: Selector, window_s: float) -> Counts | None:
        key = ("requests_finished", selector, window_s)
        if key not in self._outcomes:
            self._outcomes[key] = self._read_outcomes(selector, window_s)
        return self._outcomes[key]

    def _read_outcomes(self, selector: Selector, window_s: float) -> Counts | None:
        matchers = promql.selector_matchers(selector)
        w = promql.duration(window_s)
        by_reason = [o.finished for o in outcome_counters() if not o.failed]
        apart = [o for o in outcome_counters() if o.failed]
        total = bad = 0.0
        seen = False
        shape = f"sum by (finished_reason) (increase({{}}[{w}]))"
        by_reason_expr = promql.per_name(by_reason, [*matchers, 'finished_reason!=""'], shape)
        for s in self.client.query(by_reason_expr, self.at_ts):
            seen = True
            total += s.value
            bad += s.value if s.labels.get("finished_reason") in BAD_REASONS else 0.0
        if apart:
            failed = {o.failed for o in apart}
            names = [n for o in apart for n in (o.finished, o.failed)]
            expr = promql.per_name(names, matchers, f"sum(increase({{}}[{w}]))")
            for s in self.client.query(expr, self.at_ts):
                seen = True
                total += s.value
                bad += s.value if s.labels.get(promql.SERIES_LABEL) in failed else 0.0
        return Counts(total - bad, total) if seen else None
