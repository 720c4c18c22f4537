"""The few numbers an on-call engineer wants first: targets up, SLO states, firing alerts."""

from __future__ import annotations

import time
from dataclasses import dataclass

from slotune.collector.alerts.evaluator import RuleState, RuleStatus, evaluate_all
from slotune.collector.store import Store
from slotune.collector.views.fleet import FleetTable, fleet_table
from slotune.collector.views.slo_status import SLOState, SLOStatus, slo_statuses


@dataclass(frozen=True, slots=True)
class Overview:
    """The overview at ``end_ts``: the fleet over the last ``window_s``, SLOs, alerts."""

    end_ts: float
    window_s: float
    fleet: FleetTable
    slos: tuple[SLOStatus, ...]
    firing: tuple[RuleStatus, ...]

    @property
    def num_up(self) -> int:
        return sum(r.summary.is_up is True for r in self.fleet.targets)

    @property
    def num_down(self) -> int:
        return sum(r.summary.is_up is False for r in self.fleet.targets)

    def count(self, state: SLOState) -> int:
        return sum(s.state is state for s in self.slos)


def firing_alerts(store: Store, *, end_ts: float | None = None) -> list[RuleStatus]:
    """Every alert instance firing at ``end_ts`` (now when None), as the evaluator sees it."""
    statuses = evaluate_all(store, time.time() if end_ts is None else end_ts)
    return [s for s in statuses if s.state is RuleState.FIRING]


def overview(store: Store, *, window_s: float = 300.0, end_ts: float | None = None) -> Overview:
    """The overview now (or at ``end_ts``), the fleet over the last ``window_s``."""
    end = time.time() if end_ts is None else end_ts
    return Overview(
        end_ts=end,
        window_s=window_s,
        fleet=fleet_table(store, end - window_s, end, steps=1),
        slos=tuple(slo_statuses(store, end_ts=end)),
        firing=tuple(firing_alerts(store, end_ts=end)),
    )
