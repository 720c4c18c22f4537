"""What each receiver is sent after an evaluation round, from what the store says was sent.

Every state change is an event stored with one pending delivery per receiver (the outbox,
written in the event's own transaction) and stays pending until that receiver accepted it:
a receiver that is down, or an evaluator killed mid-send, loses nothing, because the next
round (after a restart too) sends what is pending. Delivery is at least once: a crash
between a receiver's answer and the store's update sends that batch again, which
Alertmanager deduplicates.

Still-firing alerts are sent again the way Prometheus does to Alertmanager: every
``resend_s`` (Prometheus' ``--rules.alert.resend-delay``, 1 minute), each with ``endsAt``
``4 x max(evaluation interval, resend_s)`` ahead, so Alertmanager keeps it firing while it
is re-sent and resolves it on its own only if the evaluator stops; a resolved alert goes
with ``endsAt`` at its resolution. Channels for people (Slack, the log) get a firing alert
again only after ``renotify_s`` and never once acknowledged. Each receiver's last delivery
is a time in the store, so a restart neither repeats nor forgets what was sent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from slotune.collector.alerts.evaluator import RuleStatus, instance_key
from slotune.collector.alerts.notify import Notification, Notifier, NotifyError, alert_name
from slotune.collector.store import (
    AlertEventInfo,
    AlertHistoryEntry,
    AlertState,
    Store,
    delivery_times,
    last_alert_events,
    mark_delivered,
    pending_deliveries,
)

log = logging.getLogger(__name__)
RESEND_S = 60.0
RENOTIFY_S = 4 * 3600.0
RESEND_HOLD_FACTOR = 4  # Prometheus: endsAt = 4 x max(evaluation interval, resend delay)


@dataclass(frozen=True, slots=True)
class DispatchReport:
    """One round's sending: notifications accepted (over all receivers) and failures."""

    num_sent: int
    failures: tuple[str, ...]


@dataclass
class Dispatcher:
    """Sends each round's pending events and due re-sends to every notifier.

    Attributes:
        store: the store holding events and deliveries.
        notifiers: where to send.
        interval_s: the evaluation interval (it sets how far ahead ``endsAt`` is).
        resend_s: a firing alert is sent again to Alertmanager this often.
        renotify_s: a firing alert is sent again to people after this long (0: never).
        batch: the most pending events one receiver is sent per round.
    """

    store: Store
    notifiers: Sequence[Notifier]
    interval_s: float
    resend_s: float = RESEND_S
    renotify_s: float = RENOTIFY_S
    batch: int = 500

    @property
    def receivers(self) -> list[str]:
        """The notifiers' keys, for :func:`~collector.alerts.evaluator.evaluate_all`."""
        return [n.key for n in self.notifiers]

    @property
    def hold_s(self) -> float:
        """How far ahead a firing alert's ``endsAt`` is."""
        return RESEND_HOLD_FACTOR * max(self.interval_s, self.resend_s)

    def dispatch(self, statuses: Sequence[RuleStatus]) -> DispatchReport:
        """Send what is pending or due after the round that gave ``statuses``.

        Raises:
            StoreError: the store cannot be read or written (nothing is marked sent).
        """
        at = max((s.at_ts for s in statuses), default=time.time())
        last = last_alert_events(self.store)
        firing: list[tuple[RuleStatus, AlertHistoryEntry]] = []
        for s in statuses:
            entry = last.get(instance_key(s.rule, s.labels))
            if entry is None or s.silenced_until is not None:
                continue
            # the stored state decides: an instance with no data or an error keeps firing
            if entry.event.state is AlertState.FIRING:
                firing.append((s, entry))
        sent, failures = 0, []
        for notifier in self.notifiers:
            try:
                sent += self._send(notifier, at, firing)
            except NotifyError as e:
                log.warning("%s", e)
                failures.append(str(e))
        return DispatchReport(sent, tuple(failures))

    def _send(
        self,
        notifier: Notifier,
        at: float,
        firing: Sequence[tuple[RuleStatus, AlertHistoryEntry]],
    ) -> int:
        pending = pending_deliveries(self.store, notifier.key, self.batch)
        out = [self._notification(p.kind, p.event, at) for p in pending]
        ids = [p.event_id for p in pending]
        every = self.resend_s if notifier.resends_firing else self.renotify_s
        times = delivery_times(self.store, notifier.key, [e.id for _, e in firing])
        for status, entry in firing:
            if entry.id in ids:
                continue
            last_sent = times.get(entry.id)
            if last_sent is None:  # recorded without this receiver: it has never seen it
                due = True
            elif notifier.resends_firing:
                due = at - last_sent >= every
            else:
                due = every > 0 and not entry.acked_at and at - last_sent >= every
            if due:
                out.append(self._notification(status.kind, entry.event, at))
                ids.append(entry.id)
        if not out:
            return 0
        notifier.send(out)
        mark_delivered(self.store, notifier.key, ids, at)
        return len(out)

    def _notification(self, kind: str, e: AlertEventInfo, at: float) -> Notification:
        return Notification(
            alertname=alert_name(e.rule, kind),
            rule=e.rule,
            state=e.state,
            labels=dict(e.labels),
            message=e.message,
            value=e.value,
            starts_at_ts=e.ts,
            ends_at_ts=at + self.hold_s if e.state is AlertState.FIRING else e.ts,
        )
