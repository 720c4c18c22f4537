"""Diagnoses, alert rules and alert events."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select

from slotune.collector.errors import ConfigError
from slotune.collector.store._models import AlertDelivery, AlertEvent, AlertRule, Diagnosis
from slotune.collector.store._records import (
    AlertEventInfo,
    AlertRuleInfo,
    AlertState,
    DiagnosisInfo,
)
from slotune.collector.store._store import Store


def save_diagnosis(
    store: Store, kind: str, inputs: Mapping[str, Any], result: Mapping[str, Any], subject: str = ""
) -> int:
    """Store an analysis result with its inputs; returns its id.

    Args:
        store: the open store.
        kind: what analysis produced it (e.g. ``gpu-time``, ``prefix-cache``).
        inputs: what it was computed from (JSON-serialisable).
        result: the findings (JSON-serialisable).
        subject: what it is about (a target, a run, a trace file).
    """
    with store.session() as session:
        row = Diagnosis(
            kind=kind,
            subject=subject,
            inputs=dict(inputs),
            result=dict(result),
            created_at=time.time(),
        )
        session.add(row)
        session.flush()
        return row.id


def list_diagnoses(store: Store, kind: str | None = None, limit: int = 50) -> list[DiagnosisInfo]:
    """Stored diagnoses, newest first."""
    query = select(Diagnosis).order_by(Diagnosis.created_at.desc(), Diagnosis.id.desc())
    if kind is not None:
        query = query.where(Diagnosis.kind == kind)
    with store.session() as session:
        return [
            DiagnosisInfo(
                id=r.id,
                kind=r.kind,
                subject=r.subject,
                inputs=dict(r.inputs),
                result=dict(r.result),
                created_at=r.created_at,
            )
            for r in session.scalars(query.limit(limit))
        ]


def save_alert_rule(store: Store, rule: AlertRuleInfo) -> int:
    """Create or replace an alert rule by name; returns its id."""
    with store.session() as session:
        row = session.scalars(select(AlertRule).where(AlertRule.name == rule.name)).one_or_none()
        if row is None:
            row = AlertRule(name=rule.name, created_at=time.time())
            session.add(row)
        row.kind, row.slo_name, row.metric = rule.kind, rule.slo_name, rule.metric
        row.op, row.threshold, row.for_s = rule.op, rule.threshold, rule.for_s
        row.severity, row.labels, row.config = rule.severity, dict(rule.labels), dict(rule.config)
        row.enabled = rule.enabled
        session.flush()
        return row.id


def list_alert_rules(store: Store) -> list[AlertRuleInfo]:
    """Every alert rule, by name."""
    with store.session() as session:
        return [
            AlertRuleInfo(
                name=r.name,
                kind=r.kind,
                slo_name=r.slo_name,
                metric=r.metric,
                op=r.op,
                threshold=r.threshold,
                for_s=r.for_s,
                severity=r.severity,
                labels=dict(r.labels),
                config=dict(r.config),
                enabled=r.enabled,
            )
            for r in session.scalars(select(AlertRule).order_by(AlertRule.name))
        ]


def record_alert_event(store: Store, event: AlertEventInfo, receivers: Sequence[str] = ()) -> int:
    """Store a rule's state change, pending delivery to each of ``receivers`` in the same
    transaction (the outbox: a crash after it cannot lose the notification); returns the
    event id.

    Raises:
        ConfigError: the rule is unknown or the state is not firing/resolved.
    """
    try:
        state = AlertState(event.state)
    except ValueError as e:
        raise ConfigError(f"alert state {event.state!r} is unknown; use firing or resolved") from e
    with store.session() as session:
        rule_id = session.scalar(select(AlertRule.id).where(AlertRule.name == event.rule))
        if rule_id is None:
            raise ConfigError(f"no alert rule named {event.rule!r}; save the rule first")
        row = AlertEvent(
            rule_id=rule_id,
            state=state.value,
            ts=event.ts,
            value=event.value,
            labels=dict(event.labels),
            message=event.message,
        )
        session.add(row)
        session.flush()
        session.add_all(AlertDelivery(event_id=row.id, receiver=r) for r in receivers)
        return row.id


def list_alert_events(
    store: Store, rule: str | None = None, since_ts: float | None = None
) -> list[AlertEventInfo]:
    """Alert events, oldest first, optionally of one rule and since a time."""
    query = (
        select(AlertEvent, AlertRule.name)
        .join(AlertRule, AlertRule.id == AlertEvent.rule_id)
        .order_by(AlertEvent.ts, AlertEvent.id)
    )
    if rule is not None:
        query = query.where(AlertRule.name == rule)
    if since_ts is not None:
        query = query.where(AlertEvent.ts >= since_ts)
    with store.session() as session:
        return [
            AlertEventInfo(
                rule=name,
                state=AlertState(e.state),
                ts=e.ts,
                value=e.value,
                labels=dict(e.labels),
                message=e.message,
            )
            for e, name in session.execute(query)
        ]
