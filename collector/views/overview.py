"""The few numbers an on-call engineer wants first: targets up, SLO states, firing alerts."""

from __future__ import annotations

import time
from dataclasses import dataclass

from slotune.collector.alerts import SliSource, sli_reader
from slotune.collector.alerts.evaluator import RuleState, RuleStatus, evaluate_all
from slotune.collector.alerts.thresholds import STALE_S
from slotune.collector.metrics import PromClient, metrics_reader
from slotune.collector.store import Store
from slotune.collector.views.fleet import is_stale
from slotune.collector.views.slo_status import SLOState, SLOStatus, slo_statuses


@dataclass(frozen=True, slots=True)
class Overview:
    """The overview at ``end_ts``.

    Attributes:
        end_ts: evaluation time, epoch seconds.
        num_targets: registered targets.
        num_up: targets whose newest ``up`` sample is 1 and whose last scrape is within the
            stale window (:func:`~collector.views.fleet.is_stale`).
        num_down: targets whose newest ``up`` sample is 0 (the rest expose no ``up``).
        num_stale: targets not scraped within the stale window (no agent scrapes them).
        stale_after_s: that window.
        slos: every SLO's status.
        firing: every alert instance firing, as the evaluator sees it.
    """

    end_ts: float
    num_targets: int
    num_up: int
    num_down: int
    num_stale: int
    stale_after_s: float
    slos: tuple[SLOStatus, ...]
    firing: tuple[RuleStatus, ...]

    def count(self, state: SLOState) -> int:
        return sum(s.state is state for s in self.slos)


def firing_alerts(
    store: Store,
    *,
    end_ts: float | None = None,
    metrics: PromClient | None = None,
    reader: SliSource | None = None,
) -> list[RuleStatus]:
    """Every alert instance firing at ``end_ts`` (now when None), as the evaluator sees it
    (``reader``: the SLI reader at that time to share)."""
    end = time.time() if end_ts is None else end_ts
    statuses = evaluate_all(store, end, metrics=metrics, reader=reader)
    return [s for s in statuses if s.state is RuleState.FIRING]


def overview(
    store: Store, *, end_ts: float | None = None, metrics: PromClient | None = None
) -> Overview:
    """The overview now (or at ``end_ts``), from the store's samples or ``metrics`` (a query
    API)."""
    end = time.time() if end_ts is None else end_ts
    reader = metrics_reader(store, metrics)
    targets = reader.targets(end)
    # One lookup per target: the newest "up" sample at the end (the fleet page has the rest).
    up = {p.target: p.values[0] for p in reader.series_at(["up"], [end])}
    slis = sli_reader(store, end, metrics)  # the SLO list and the alerts read the same series
    stale = {t.name for t in targets if is_stale(t.last_seen_at, end)}
    fresh = [t for t in targets if t.name not in stale]
    return Overview(
        end_ts=end,
        num_targets=len(targets),
        num_up=sum((up.get(t.name) or 0.0) >= 1.0 for t in fresh),
        num_down=sum(up.get(t.name) == 0.0 for t in fresh),
        num_stale=len(stale),
        stale_after_s=STALE_S,
        slos=tuple(slo_statuses(store, end_ts=end, reader=slis)),
        firing=tuple(firing_alerts(store, end_ts=end, reader=slis)),
    )
