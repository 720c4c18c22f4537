"""One SLO's state at a time: attainment, budget left, burn rate per window, firing alerts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from slotune.collector.alerts.policy import burn_windows, error_budget, has_budget
from slotune.collector.alerts.sli import Counts, SliReader
from slotune.collector.alerts.sli_source import SliSource
from slotune.collector.alerts.thresholds import STALE_S
from slotune.collector.errors import MetricsUnavailable, SlotuneError
from slotune.collector.slo import SLO, BurnWindow
from slotune.collector.store import Store


@dataclass(frozen=True, slots=True)
class WindowBurn:
    """Error ratio and burn rate over one window ending at the evaluation time (None: no
    request in the window)."""

    window_s: float
    error_ratio: float | None
    burn_rate: float | None


@dataclass(frozen=True, slots=True)
class ConditionStatus:
    """One multi-window condition: firing when both windows burn faster than its factor."""

    window: BurnWindow
    long: WindowBurn
    short: WindowBurn

    @property
    def is_firing(self) -> bool:
        f = self.window.factor
        return (self.long.burn_rate or 0.0) > f and (self.short.burn_rate or 0.0) > f


@dataclass(frozen=True, slots=True)
class SloStatus:
    """An SLO at ``at_ts``.

    Attributes:
        slo: the SLO.
        at_ts: evaluation time (epoch seconds).
        num_good: good requests over the SLO window (None: no data).
        num_total: requests over the SLO window.
        attainment: good / total over the SLO window.
        budget_left: share of the error budget left (1 untouched, 0 spent, negative
            overspent).
        burns: error ratio and burn rate per distinct window, shortest first.
        conditions: each burn-rate condition of the policy.
        note: how bucket bounds were handled, when the threshold is not one.
        newest_sample_ts: the newest sample of the SLO's series at or before ``at_ts``
            (None: none).
    """

    slo: SLO
    at_ts: float
    num_good: float | None
    num_total: float | None
    attainment: float | None
    budget_left: float | None
    burns: tuple[WindowBurn, ...]
    conditions: tuple[ConditionStatus, ...]
    note: str | None = None
    newest_sample_ts: float | None = None

    @property
    def has_data(self) -> bool:
        """Whether the SLO's series have a sample no older than :data:`STALE_S` (like
        Prometheus' staleness): without one, its agent or targets stopped reporting and the
        SLO's state is "no data", never "ok"."""
        newest = self.newest_sample_ts
        return newest is not None and self.at_ts - newest <= STALE_S

    @property
    def firing(self) -> tuple[str, ...]:
        """Severities with at least one firing condition."""
        return tuple(dict.fromkeys(c.window.severity for c in self.conditions if c.is_firing))

    def to_dict(self) -> dict[str, Any]:
        return {
            "slo": self.slo.name,
            "spec": self.slo.spec,
            "at": self.at_ts,
            "objective": self.slo.objective,
            "good": self.num_good,
            "total": self.num_total,
            "attainment": self.attainment,
            "budget_left": self.budget_left,
            "burn_rates": [
                {"window_s": b.window_s, "error_ratio": b.error_ratio, "burn_rate": b.burn_rate}
                for b in self.burns
            ],
            "conditions": [
                {
                    "severity": c.window.severity,
                    "long_s": c.window.long_s,
                    "short_s": c.window.short_s,
                    "factor": c.window.factor,
                    "long_burn_rate": c.long.burn_rate,
                    "short_burn_rate": c.short.burn_rate,
                    "firing": c.is_firing,
                }
                for c in self.conditions
            ],
            "firing": list(self.firing),
            "no_data": not self.has_data,
            "newest_sample_ts": self.newest_sample_ts,
            "note": self.note,
        }


def slo_status(
    store: Store,
    slo: SLO,
    at_ts: float,
    *,
    min_window_s: float = 0.0,
    reader: SliSource | None = None,
) -> SloStatus:
    """Attainment, budget and burn rates of one SLO from the engine series in the store.

    Args:
        store: the open store.
        slo: the SLO (its selector picks the series).
        at_ts: evaluation time, epoch seconds.
        min_window_s: the scrape interval; shorter burn-rate windows are refused.
        reader: a reader shared by the SLOs of one evaluation round, of the store or a
            query API (the store's, made, when None).

    An objective of 100 % has no budget to burn: its status holds the attainment only.

    Raises:
        SLOSpecError: a burn-rate window is unusable.
        MetricsUnavailable: the reader's query API cannot be read.
    """
    if reader is None or reader.at_ts != at_ts:
        reader = SliReader(store, at_ts)
    budget = error_budget(slo) if has_budget(slo) else None
    policy = burn_windows(slo, min_window_s=min_window_s) if budget is not None else ()
    windows = status_windows(slo, min_window_s=min_window_s)
    read = reader.counts(slo, windows)
    by_window = dict(zip(windows, read.counts, strict=True))
    burns = {w: _burn(w, by_window[w], budget) for w in windows}
    period = by_window[slo.window_s]
    ratio = period.error_ratio if period is not None else None
    return SloStatus(
        slo=slo,
        at_ts=at_ts,
        num_good=period.good if period is not None else None,
        num_total=period.total if period is not None else None,
        attainment=None if ratio is None else 1.0 - ratio,
        budget_left=None if ratio is None or budget is None else 1.0 - ratio / budget,
        burns=tuple(burns[w] for w in windows if w != slo.window_s),
        conditions=tuple(ConditionStatus(c, burns[c.long_s], burns[c.short_s]) for c in policy),
        note=read.note.message(slo.name) if read.note is not None else None,
        newest_sample_ts=reader.newest_ts(slo),
    )


def status_windows(slo: SLO, *, min_window_s: float = 0.0) -> list[float]:
    """Every window :func:`slo_status` reads: the policy's and the SLO window, shortest first."""
    if not has_budget(slo):
        return [slo.window_s]
    policy = burn_windows(slo, min_window_s=min_window_s)
    return sorted({w for c in policy for w in (c.long_s, c.short_s)} | {slo.window_s})


def read_ahead(reader: SliSource, slos: Iterable[tuple[SLO, float]]) -> None:
    """Have ``reader`` read at once what :func:`slo_status` reads of each (SLO, scrape
    interval); an SLO that cannot be read ahead is read, and fails, on its own."""
    needs = []
    for slo, min_window_s in slos:
        with contextlib.suppress(SlotuneError):
            needs.append((slo, status_windows(slo, min_window_s=min_window_s)))
    with contextlib.suppress(MetricsUnavailable):
        reader.prefetch(needs)


def _burn(window_s: float, counts: Counts | None, budget: float | None) -> WindowBurn:
    ratio = counts.error_ratio if counts is not None else None
    rate = None if ratio is None or budget is None else ratio / budget
    return WindowBurn(window_s, ratio, rate)
