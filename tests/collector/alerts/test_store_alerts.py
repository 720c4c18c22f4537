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
    last_alert_events,
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
