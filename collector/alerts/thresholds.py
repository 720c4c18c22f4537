"""Reading a threshold rule's metric per target at one time, and whether it held for ``for``.

Gauges: the value is the newest sample (no older than :data:`STALE_S`, like Prometheus'
staleness), and the condition held for ``for`` when the sample at or before the window start
and every sample in the window satisfy it (from the window's min / max). Rates and ratios are
checked at :data:`FOR_POINTS` instants spread over the window. A target whose series of the
metric all went stale gets a value of None ("no data") instead of vanishing, so a dead agent
is seen; ``scrape_age_s`` is the metric that fires on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from slotune.collector.alerts.metrics import MetricDef, MetricKind, metric_def
from slotune.collector.alerts.rules import ThresholdRule
from slotune.collector.alerts.sli import selects
from slotune.collector.store import (
    GaugeStats,
    SeriesRef,
    Store,
    find_series,
    gauge_stats,
    increases,
    values_at,
)

STALE_S = 300.0
RATE_WINDOW_S = 300.0
FOR_POINTS = 5


@dataclass(frozen=True, slots=True)
class TargetValue:
    """A rule's metric on one target: the value now (None: no data, every series of it is
    stale) and whether the condition held."""

    target: str
    value: float | None
    holds: bool
    held_for: bool


class ThresholdReader:
    """Reads metrics at one evaluation time, sharing look-ups among the rules of a round."""

    def __init__(self, store: Store, at_ts: float, *, rate_window_s: float = RATE_WINDOW_S) -> None:
        self.store = store
        self.at_ts = at_ts
        self.rate_window_s = rate_window_s
        self._series: dict[str, list[SeriesRef]] = {}
        self._points: dict[tuple[str, float], dict[int, tuple[float, float]]] = {}
        self._stats: dict[tuple[str, float], dict[int, GaugeStats]] = {}
        self._inc: dict[tuple[str, float], dict[int, float | None]] = {}

    def series(self, name: str) -> list[SeriesRef]:
        if name not in self._series:
            self._series[name] = find_series(self.store, [name])
        return self._series[name]

    def _at(self, name: str, t: float) -> dict[int, tuple[float, float]]:
        key = (name, t)
        if key not in self._points:
            ids = [r.id for r in self.series(name)]
            self._points[key] = values_at(self.store, ids, t) if ids else {}
        return self._points[key]

    def evaluate(self, rule: ThresholdRule) -> list[TargetValue]:
        """The rule's metric on every target its selector matches that has a series of it
        (value None where they are all stale)."""
        d = metric_def(rule.metric)
        found = self._gauge(rule, d) if d.kind is MetricKind.GAUGE else self._over_for(rule, d)
        if d.kind is MetricKind.AGE:
            return found
        # a rate over a window whose samples stopped would read 0: stale wins over it
        stale = self._stale(rule, d)
        fresh = [tv for tv in found if tv.target not in stale]
        gone = [TargetValue(t, None, False, False) for t in stale]
        return sorted([*fresh, *gone], key=lambda tv: tv.target)

    def _stale(self, rule: ThresholdRule, d: MetricDef) -> set[str]:
        """Targets with samples of the metric's first series, none of them recent."""
        name = d.series[0]
        points = self._at(name, self.at_ts)
        newest: dict[str, float] = {}
        for r in self._refs(rule, name):
            if r.id in points:
                newest[r.target] = max(newest.get(r.target, -math.inf), points[r.id][0])
        return {t for t, ts in newest.items() if ts < self.at_ts - STALE_S}

    def _over_for(self, rule: ThresholdRule, d: MetricDef) -> list[TargetValue]:
        instants = [self.at_ts]
        if rule.for_s > 0:
            step = rule.for_s / (FOR_POINTS - 1)
            instants = [self.at_ts - rule.for_s + i * step for i in range(FOR_POINTS)]
        per_instant = [self._derived(rule, d, t) for t in instants]
        out = []
        for target, value in sorted(per_instant[-1].items()):
            history = [vals.get(target) for vals in per_instant]
            held = all(v is not None and rule.holds(v) for v in history)
            out.append(TargetValue(target, value, rule.holds(value), held))
        return out

    def _refs(self, rule: ThresholdRule, name: str) -> list[SeriesRef]:
        return [r for r in self.series(name) if selects(rule.selector, r)]

    def _gauge(self, rule: ThresholdRule, d: MetricDef) -> list[TargetValue]:
        name = d.series[0]
        refs = self._refs(rule, name)
        now = self._at(name, self.at_ts)
        fresh = {
            r.id: now[r.id][1] for r in refs if r.id in now and now[r.id][0] >= self.at_ts - STALE_S
        }
        held_ids: set[int] = set()
        if rule.for_s > 0 and fresh:
            start = self.at_ts - rule.for_s
            before = self._at(name, start)
            key = (name, start)
            if key not in self._stats:
                self._stats[key] = gauge_stats(self.store, self.series(name), start, self.at_ts)
            stats = self._stats[key]
            for sid in fresh:
                st, first = stats.get(sid), before.get(sid)
                if st is not None and first is not None and _held(rule, st, first[1]):
                    held_ids.add(sid)
        by_target: dict[str, list[tuple[float, bool]]] = {}
        for r in refs:
            if r.id in fresh:
                held = r.id in held_ids if rule.for_s > 0 else rule.holds(fresh[r.id])
                by_target.setdefault(r.target, []).append((fresh[r.id], held))
        out = []
        for target, values in sorted(by_target.items()):
            value = _worst(rule, [v for v, _ in values])
            out.append(TargetValue(target, value, rule.holds(value), any(h for _, h in values)))
        return out

    def _derived(self, rule: ThresholdRule, d: MetricDef, t: float) -> dict[str, float]:
        if d.kind is MetricKind.AGE:
            points = self._at(d.series[0], t)
            ages: dict[str, float] = {}
            for r in self._refs(rule, d.series[0]):
                if r.id in points:
                    ages[r.target] = min(ages.get(r.target, math.inf), t - points[r.id][0])
            return ages
        if d.kind is MetricKind.RATIO:
            num = self._sum_at(rule, d.series[0], t)
            den = self._sum_at(rule, d.series[1], t)
            return {k: num[k] / den[k] for k in num if den.get(k)}
        window = self.rate_window_s
        first = self._increase(rule, d.series[0], t, window)
        if d.kind is MetricKind.RATE:
            return {k: v / window for k, v in first.items()}
        queries = self._increase(rule, d.series[1], t, window)
        out = {k: first.get(k, 0.0) / q for k, q in queries.items() if q > 0}
        if d.fallback_gauge is not None:
            gauge = self._sum_at(rule, d.fallback_gauge, t, worst=True)
            out = {**{k: v for k, v in gauge.items() if k not in queries}, **out}
        return out

    def _sum_at(
        self, rule: ThresholdRule, name: str, t: float, *, worst: bool = False
    ) -> dict[str, float]:
        points = self._at(name, t)
        per: dict[str, list[float]] = {}
        for r in self._refs(rule, name):
            p = points.get(r.id)
            if p is not None and p[0] >= t - STALE_S:
                per.setdefault(r.target, []).append(p[1])
        return {k: (_worst(rule, v) if worst else sum(v)) for k, v in per.items()}

    def _increase(
        self, rule: ThresholdRule, name: str, t: float, window: float
    ) -> dict[str, float]:
        key = (name, t)
        if key not in self._inc:  # every target's at once: rules share them
            ids = [r.id for r in self.series(name)]
            found = increases(self.store, ids, t, [t - window]) if ids else {}
            self._inc[key] = {sid: v[0] for sid, v in found.items()}
        inc = self._inc[key]
        out: dict[str, float] = {}
        for r in self._refs(rule, name):
            v = inc.get(r.id)
            if v is not None:
                out[r.target] = out.get(r.target, 0.0) + v
        return out


def _worst(rule: ThresholdRule, values: Sequence[float]) -> float:
    return min(values) if rule.op in ("<", "<=") else max(values)


def _held(rule: ThresholdRule, st: GaugeStats, first: float) -> bool:
    if not rule.holds(first):
        return False
    if rule.op in (">", ">="):
        return rule.holds(st.min)
    if rule.op in ("<", "<="):
        return rule.holds(st.max)
    if rule.op == "==":
        return st.min == st.max == rule.threshold
    return not st.min <= rule.threshold <= st.max
