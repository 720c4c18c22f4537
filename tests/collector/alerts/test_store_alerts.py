from __future__ import annotations

import pytest
from alert_series import T0

from slotune.collector.errors import ConfigError
from slotune.collector.store import (
    AlertEventInfo,
    AlertRuleInfo,
    AlertState,
    Store,
    ack_event,
    active_silences,
    alert_history,
    delete_alert_rules,
    delivery_times,
    last_alert_events,
    mark_delivered,
    pending_deliveries,
    record_alert_event,
    save_alert_rule,
    silence_rule,
)


def test_silence_ack_and_history(store: Store) -> None:
    save_alert_rule(store, AlertRuleInfo(name="kv-full", kind="threshold", metric="kv_usage"))
    first = record_alert_event(
        store, AlertEventInfo("kv-full", AlertState.FIRING, T0, 0.95, {"target": "a"})
    )
    record_alert_event(
        store, AlertEventInfo("kv-full", AlertState.RESOLVED, T0 + 60, 0.5, {"target": "a"})
    )
    record_alert_event(
        store, AlertEventInfo("kv-full", AlertState.FIRING, T0 + 30, 0.97, {"target": "b"})
    )
    ack_event(store, first, "looking")
    history = alert_history(store)
    assert [(h.event.ts, h.acked_at is not None) for h in history] == [
        (T0, True),
        (T0 + 30, False),
        (T0 + 60, False),
    ]
    assert history[0].ack_comment == "looking"
    last = last_alert_events(store)
    assert last[("kv-full", (("target", "a"),))].event.state is AlertState.RESOLVED
    assert last[("kv-full", (("target", "b"),))].event.state is AlertState.FIRING

    silence_rule(store, "kv-full", T0 + 7200, "maintenance")
    assert active_silences(store, T0)["kv-full"].comment == "maintenance"
    assert active_silences(store, T0 + 7200) == {}
    with pytest.raises(ConfigError, match="no alert rule named 'nope'"):
        silence_rule(store, "nope", T0 + 10)
    with pytest.raises(ConfigError, match="no alert event with id 999"):
        ack_event(store, 999)


def test_the_delivery_outbox(store: Store) -> None:
    save_alert_rule(store, AlertRuleInfo(name="kv-full", kind="threshold", metric="kv_usage"))
    fired = record_alert_event(
        store, AlertEventInfo("kv-full", AlertState.FIRING, T0, 0.95, {"target": "a"}), ["am", "s"]
    )
    resolved = record_alert_event(
        store, AlertEventInfo("kv-full", AlertState.RESOLVED, T0 + 60, 0.5, {"target": "a"}), ["am"]
    )
    pending = pending_deliveries(store, "am")
    assert [(p.event_id, p.kind, p.event.state) for p in pending] == [
        (fired, "threshold", AlertState.FIRING),
        (resolved, "threshold", AlertState.RESOLVED),
    ]
    assert pending[0].event.labels == {"target": "a"}
    assert [p.event_id for p in pending_deliveries(store, "am", limit=1)] == [fired]
    mark_delivered(store, "am", [fired], T0 + 1)
    mark_delivered(store, "am", [fired], T0 + 61)  # a re-send moves the time on
    mark_delivered(store, "other", [fired], T0 + 2)  # a receiver it was not pending for
    assert [p.event_id for p in pending_deliveries(store, "am")] == [resolved]
    assert delivery_times(store, "am", [fired, resolved]) == {fired: T0 + 61}
    assert delivery_times(store, "other", [fired]) == {fired: T0 + 2}
    assert [p.event_id for p in pending_deliveries(store, "s")] == [fired]
    delete_alert_rules(store, ["kv-full"])  # its events and their deliveries go with it
    assert pending_deliveries(store, "s") == [] and delivery_times(store, "am", [fired]) == {}
