"""Evaluating every alert rule at a time, recording state changes, and the loop.

Evaluation is stateless — the rule's window is read from the store at the evaluation time,
so ``evaluate_all(store, at)`` answers for any past time — except for threshold hysteresis,
which needs to know whether the alert is firing: that is the newest stored event of the
alert instance (rule + labels). A rule that fails to evaluate gets state ``error`` and the
others go on. A rule whose data went stale gets state ``no_data``; neither ``error`` nor
``no_data`` changes whether the instance is firing (a dead agent must not resolve its own
alerts).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from slotune.collector.alerts.rules import THRESHOLD_KIND, ThresholdRule
from slotune.collector.alerts.sli_source import SliSource, sli_reader
from slotune.collector.alerts.slo_rules import SLO_KIND, load_slos
from slotune.collector.alerts.status import read_ahead, slo_status
from slotune.collector.alerts.thresholds import STALE_S, ThresholdReader
from slotune.collector.errors import (
    MetricsUnavailable,
    SlotuneError,
    StoreError,
    StoreUnavailable,
)
from slotune.collector.metrics import PromClient
from slotune.collector.slo import SLO, Selector
from slotune.collector.store import (
    AlertEventInfo,
    AlertRuleInfo,
    AlertState,
    Store,
    TargetInfo,
    active_silences,
    last_alert_events,
    list_alert_rules,
    list_targets,
    open_store,
    record_alert_event,
    slo_scrape_intervals,
)

log = logging.getLogger(__name__)
DEFAULT_INTERVAL_S = 30.0


class RuleState(StrEnum):
    OK = "ok"
    PENDING = "pending"
    FIRING = "firing"
    ERROR = "error"
    NO_DATA = "no_data"

    @property
    def label(self) -> str:
        """For people: ``no data`` rather than ``no_data``."""
        return self.value.replace("_", " ")


@dataclass(frozen=True, slots=True)
class RuleStatus:
    """One alert instance (a rule, on one target for threshold rules) at one time.

    Attributes:
        rule: rule name.
        kind: ``slo_burn`` or ``threshold``.
        severity: the rule's severity.
        state: ok / pending / firing / error / no_data.
        value: the metric's value (threshold rules) or the highest burn rate of the
            conditions (SLO rules); None without data.
        labels: identify the instance (``target``, ``slo``, ``severity``) plus rule labels.
        at_ts: evaluation time.
        message: what it means, for people.
        burn_rates: SLO rules: burn rate per window, keyed by window seconds.
        silenced_until: set while the rule is silenced.
        changed: the event this evaluation recorded (firing or resolved), if any.
        event_id: the id of that event.
    """

    rule: str
    kind: str
    severity: str
    state: RuleState
    value: float | None
    labels: Mapping[str, str]
    at_ts: float
    message: str = ""
    burn_rates: Mapping[str, float | None] = field(default_factory=dict)
    silenced_until: float | None = None
    changed: AlertState | None = None
    event_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "kind": self.kind,
            "severity": self.severity,
            "state": self.state.value,
            "value": self.value,
            "labels": dict(self.labels),
            "at": self.at_ts,
            "message": self.message,
            "burn_rates": dict(self.burn_rates),
            "silenced_until": self.silenced_until,
            "changed": self.changed.value if self.changed else None,
            "event_id": self.event_id,
        }


InstanceKey = tuple[str, tuple[tuple[str, str], ...]]


def instance_key(rule: str, labels: Mapping[str, str]) -> InstanceKey:
    """An alert instance: its rule and its labels."""
    return rule, tuple(sorted(labels.items()))


def evaluate_all(
    store: Store,
    at_ts: float | None = None,
    *,
    record: bool = False,
    min_window_s: float | None = None,
    receivers: Sequence[str] = (),
    metrics: PromClient | None = None,
    reader: SliSource | None = None,
) -> list[RuleStatus]:
    """Every enabled rule's state at ``at_ts`` (now when None).

    Args:
        store: the open store.
        at_ts: evaluation time, epoch seconds.
        record: store an event for every instance that starts firing or resolves.
        min_window_s: the scrape interval; SLO windows shorter than it are an error (None:
            each SLO's own, stored by ``slo apply``; 0 for an SLO stored without one).
        receivers: the notifiers' keys each recorded event is pending for (the outbox),
            unless its rule is silenced.
        metrics: the query API SLO rules read (None: the store's samples); an SLO rule
            whose data it cannot give is ``no_data``, never ``ok``.
        reader: the SLI reader at ``at_ts`` to share with other reads of that time (the
            overview's SLO list); made from ``metrics`` when None.

    Returns:
        One status per alert instance, by rule then labels.

    Raises:
        StoreError: the store cannot be read (a single rule's failure is a status instead).
    """
    at = time.time() if at_ts is None else at_ts
    rules = [r for r in list_alert_rules(store) if r.enabled]
    slos = load_slos(store) if any(r.kind == SLO_KIND for r in rules) else {}
    stored = slo_scrape_intervals(store) if slos and min_window_s is None else {}
    windows = {
        name: stored.get(name, 0.0) if min_window_s is None else min_window_s for name in slos
    }
    last = last_alert_events(store)
    silences = active_silences(store, at)
    if reader is None or reader.at_ts != at:
        reader = sli_reader(store, at, metrics)
    names = {r.slo_name or "" for r in rules if r.kind == SLO_KIND} & slos.keys()
    read_ahead(reader, [(slos[n], windows[n]) for n in sorted(names)])
    thr_reader = ThresholdReader(store, at)
    out: list[RuleStatus] = []
    for rule in rules:
        try:
            if rule.kind == SLO_KIND:
                slo = slos.get(rule.slo_name or "")
                if slo is None:
                    raise SlotuneError(f"its SLO {rule.slo_name!r} is not stored any more")
                found = [_slo_instance(store, rule, slo, at, reader, windows[slo.name])]
            elif rule.kind == THRESHOLD_KIND:
                found = _threshold_instances(rule, thr_reader, at, last)
            else:
                raise SlotuneError(f"unknown rule kind {rule.kind!r}")
        except StoreError:
            raise
        except SlotuneError as e:
            log.warning("alert rule %s failed: %s", rule.name, e)
            found = [
                RuleStatus(
                    rule.name,
                    rule.kind,
                    rule.severity,
                    RuleState.ERROR,
                    None,
                    dict(rule.labels),
                    at,
                    str(e),
                )
            ]
        silence = silences.get(rule.name)
        for status in found:
            if silence is not None:
                status = _with(status, silenced_until=silence.until_ts)
            out.append(_transition(store, status, last, record, receivers))
    return out


def _with(status: RuleStatus, **changes: Any) -> RuleStatus:
    return replace(status, **changes)


def _transition(
    store: Store,
    status: RuleStatus,
    last: Mapping[InstanceKey, Any],
    record: bool,
    receivers: Sequence[str],
) -> RuleStatus:
    prev = last.get(instance_key(status.rule, status.labels))
    was_firing = prev is not None and prev.event.state is AlertState.FIRING
    is_firing = status.state is RuleState.FIRING
    if status.state in (RuleState.ERROR, RuleState.NO_DATA) or was_firing == is_firing:
        return status
    change = AlertState.FIRING if is_firing else AlertState.RESOLVED
    event_id = None
    if record:
        event_id = record_alert_event(
            store,
            AlertEventInfo(
                status.rule, change, status.at_ts, status.value, dict(status.labels), status.message
            ),
            () if status.silenced_until is not None else receivers,
        )
    return _with(status, changed=change, event_id=event_id)


def _slo_instance(
    store: Store, rule: AlertRuleInfo, slo: SLO, at: float, reader: SliSource, min_window_s: float
) -> RuleStatus:
    try:
        st = slo_status(store, slo, at, min_window_s=min_window_s, reader=reader)
    except MetricsUnavailable as e:
        return RuleStatus(
            rule=rule.name,
            kind=rule.kind,
            severity=rule.severity,
            state=RuleState.NO_DATA,
            value=None,
            labels={**rule.labels, "slo": slo.name, "severity": rule.severity},
            at_ts=at,
            message=f"SLO {slo.name} ({slo.spec}): no data: {e}",
        )
    mine = [c for c in st.conditions if c.window.severity == rule.severity]
    rates = [min(c.long.burn_rate or 0.0, c.short.burn_rate or 0.0) for c in mine]
    firing = [c for c in mine if c.is_firing]
    if firing:
        c = firing[0]
        message = (
            f"SLO {slo.name} ({slo.spec}) burns its error budget {c.long.burn_rate:.3g}x over "
            f"{_dur(c.window.long_s)} and {c.short.burn_rate:.3g}x over {_dur(c.window.short_s)} "
            f"(threshold {c.window.factor:g}x)"
        )
    else:
        message = f"SLO {slo.name} ({slo.spec}): no {rule.severity} burn-rate condition holds"
    state = RuleState.FIRING if firing else RuleState.OK
    if not st.has_data:
        state = RuleState.NO_DATA
        why = (
            _unmatched(slo.selector, list_targets(store)) if st.newest_sample_ts is None else None
        ) or _staleness(st.newest_sample_ts, at)
        message = f"SLO {slo.name} ({slo.spec}): no data: {why}"
    if st.note:
        message += f"; {st.note}"
    return RuleStatus(
        rule=rule.name,
        kind=rule.kind,
        severity=rule.severity,
        state=state,
        value=max(rates) if rates and st.num_total is not None and st.has_data else None,
        labels={**rule.labels, "slo": slo.name, "severity": rule.severity},
        at_ts=at,
        message=message,
        burn_rates={f"{b.window_s:g}": b.burn_rate for b in st.burns},
    )


def _threshold_instances(
    rule_info: AlertRuleInfo,
    reader: ThresholdReader,
    at: float,
    last: Mapping[InstanceKey, Any],
) -> list[RuleStatus]:
    rule = ThresholdRule.from_info(rule_info)
    out = []
    for tv in reader.evaluate(rule):
        labels = {**rule.labels, "target": tv.target, "severity": rule.severity}
        prev = last.get(instance_key(rule.name, labels))
        was_firing = prev is not None and prev.event.state is AlertState.FIRING
        if tv.value is None:
            out.append(
                RuleStatus(
                    rule=rule.name,
                    kind=rule_info.kind,
                    severity=rule.severity,
                    state=RuleState.NO_DATA,
                    value=None,
                    labels=labels,
                    at_ts=at,
                    message=f"{tv.target}: no data: no {rule.metric} sample in the last "
                    f"{_dur(STALE_S)} (rule {rule.expr})",
                )
            )
            continue
        if was_firing:  # hysteresis: resolved only once past the resolve value
            state = RuleState.FIRING if rule.still_firing(tv.value) else RuleState.OK
        elif tv.held_for:
            state = RuleState.FIRING
        else:
            state = RuleState.PENDING if tv.holds else RuleState.OK
        out.append(
            RuleStatus(
                rule=rule.name,
                kind=rule_info.kind,
                severity=rule.severity,
                state=state,
                value=tv.value,
                labels=labels,
                at_ts=at,
                message=f"{tv.target}: {rule.metric} is {tv.value:.4g} (rule {rule.expr})",
            )
        )
    return out


def _unmatched(selector: Selector, targets: Sequence[TargetInfo]) -> str | None:
    """Why no series can match: the selector names no registered target (None when one may
    match; a target whose model is not known may serve the selector's model)."""
    if not selector.as_dict():
        return None
    for t in targets:
        if (
            selector.target in (None, t.name)
            and selector.pool in (None, t.pool)
            and (selector.model is None or t.model in (None, selector.model))
        ):
            return None
    names = ", ".join(t.name for t in targets[:5]) or "none registered"
    wanted = ", ".join(f"{k}={v}" for k, v in selector.as_dict().items())
    return (
        f"its selector ({wanted}) matches no target (targets: {names}); fix the selector, "
        "or see the targets with `slotune targets list`"
    )


def _staleness(newest_ts: float | None, at: float) -> str:
    if newest_ts is None:
        return "no stored sample of its series (is an agent scraping its targets?)"
    return (
        f"the newest sample of its series is {_dur(round(at - newest_ts))} old "
        f"(stale after {_dur(STALE_S)}: is the agent running?)"
    )


def _dur(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and (seconds / size).is_integer():
            return f"{seconds / size:g}{unit}"
    if seconds >= 60 and float(seconds).is_integer():
        # An age read a second late is "10m1s", not "601s".
        hours, rest = divmod(int(seconds), 3600)
        minutes, secs = divmod(rest, 60)
        parts = ((hours, "h"), (minutes, "m"), (secs, "s"))
        return "".join(f"{n}{unit}" for n, unit in parts if n)
    return f"{seconds:g}s"


def open_when_reachable(
    url: str | None,
    *,
    retry_s: float = DEFAULT_INTERVAL_S,
    max_attempts: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Store:
    """Open the store, waiting for it while it is unreachable (an evaluator started before
    its database keeps trying and says so).

    Raises:
        StoreUnavailable: still unreachable after ``max_attempts`` (never when None).
        SchemaMismatch: the schema needs ``slotune db upgrade``: waiting would not help.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return open_store(url)
        except StoreUnavailable as e:
            if max_attempts is not None and attempt >= max_attempts:
                raise
            log.warning("store unreachable: %s; retrying in %gs", e, retry_s)
            sleep(retry_s)


def run_loop(
    store: Store,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    min_window_s: float | None = None,
    receivers: Sequence[str] = (),
    metrics: PromClient | None = None,
    on_round: Callable[[list[RuleStatus]], None] | None = None,
    max_rounds: int | None = None,
    sleep: Callable[[float], object] | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Evaluate every ``interval_s``, recording events pending for ``receivers``, until
    ``max_rounds`` (forever: None) or ``stop`` is set; ``on_round`` gets each round's statuses.

    A store that cannot be reached is logged and retried next round; the loop never stops
    on it. ``stop`` ends the wait between rounds at once, and a round it interrupts is
    finished first (its events stored, its notifications handed over). Returns the number
    of rounds run.
    """
    stop = stop if stop is not None else threading.Event()
    wait = sleep if sleep is not None else stop.wait
    rounds = 0
    while (max_rounds is None or rounds < max_rounds) and not stop.is_set():
        started = time.monotonic()
        try:
            statuses = evaluate_all(
                store,
                record=True,
                min_window_s=min_window_s,
                receivers=receivers,
                metrics=metrics,
            )
            if on_round is not None:
                on_round(statuses)
        except StoreError as e:
            log.warning("alert evaluation skipped: %s; retrying in %gs", e, interval_s)
        rounds += 1
        if max_rounds is None or rounds < max_rounds:
            wait(max(0.0, interval_s - (time.monotonic() - started)))
    return rounds
