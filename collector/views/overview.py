"""The few numbers an on-call engineer wants first: targets up, SLO states, firing alerts."""

from __future__ import annotations

import time
from dataclasses import dataclass

from slotune.collector.store import AlertEventInfo, AlertState, Store, list_alert_events
from slotune.collector.views.fleet import FleetTable, fleet_table
from slotune.collector.views.slo_status import SLOState, SLOStatus, slo_statuses

# How far back alert history is read to find the rules firing now.
ALERT_LOOKBACK_S = 30 * 86400.0


@dataclass(frozen=True, slots=True)
class Overview:
    """The overview at ``end_ts``: the fleet over the last ``window_s``, SLOs, alerts."""

    end_ts: float
    window_s: float
    fleet: FleetTable
    slos: tuple[SLOStatus, ...]
    firing: tuple[AlertEventInfo, ...]

    @property
    def num_up(self) -> int:
        return sum(r.summary.is_up is True for r in self.fleet.targets)

    @property
    def num_down(self) -> int:
        return sum(r.summary.is_up is False for r in self.fleet.targets)

    def count(self, state: SLOState) -> int:
        return sum(s.state is state for s in self.slos)


def firing_alerts(store: Store, *, end_ts: float | None = None) -> list[AlertEventInfo]:
    """The newest event of every rule whose newest event is ``firing``."""
    end = time.time() if end_ts is None else end_ts
    newest: dict[str, AlertEventInfo] = {}
    for e in list_alert_events(store, since_ts=end - ALERT_LOOKBACK_S):
        if e.ts <= end:
            newest[e.rule] = e
    return sorted((e for e in newest.values() if e.state is AlertState.FIRING), key=lambda e: -e.ts)


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
