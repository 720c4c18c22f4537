"""Alerts as the alerts page shows them: grouped by severity, and which events can still be
acknowledged (a firing alert; one that has resolved needs no one on it)."""

from __future__ import annotations

from collections.abc import Sequence

from slotune.collector.alerts.evaluator import RuleStatus
from slotune.collector.store import AlertHistoryEntry

# Most urgent first; a severity not listed sorts after these, by name.
SEVERITY_ORDER = ("critical", "page", "error", "ticket", "warning", "info")


def severity_rank(severity: str) -> int:
    s = severity.lower()
    return SEVERITY_ORDER.index(s) if s in SEVERITY_ORDER else len(SEVERITY_ORDER)


def by_severity(statuses: Sequence[RuleStatus]) -> list[RuleStatus]:
    """Firing rules first, then each group most severe first, then by rule name."""
    return sorted(
        statuses,
        key=lambda s: (s.state.value != "firing", severity_rank(s.severity), s.severity, s.rule),
    )


def ackable(
    history: Sequence[AlertHistoryEntry], statuses: Sequence[RuleStatus]
) -> list[AlertHistoryEntry]:
    """Unacknowledged firing events of rules firing now, each its rule's newest event (an
    older firing event of a rule has since resolved), newest first."""
    firing = {s.rule for s in statuses if s.state.value == "firing"}
    newest: dict[str, AlertHistoryEntry] = {}
    for h in history:
        cur = newest.get(h.event.rule)
        if cur is None or (h.event.ts, h.id) > (cur.event.ts, cur.id):
            newest[h.event.rule] = h
    out = [
        h
        for rule, h in newest.items()
        if rule in firing and h.event.state.value == "firing" and h.acked_at is None
    ]
    return sorted(out, key=lambda h: (-h.event.ts, -h.id))
