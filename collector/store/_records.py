"""Frozen records that go into and come out of the store (ORM rows never leave it)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from slotune.collector.records import RequestRecord


class AlertState(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


class StudyStatus(StrEnum):
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class SampleIn:
    """One scraped value.

    Attributes:
        target: target name (registered automatically when unknown).
        name: series name; a histogram family ``F`` arrives as ``F_bucket`` (with ``le``),
            ``F_sum`` and ``F_count``, all cumulative.
        type: a :class:`MetricType` value of the family.
        labels: the series' labels.
        ts: epoch seconds.
        value: the value.
    """

    target: str
    name: str
    type: str
    labels: Mapping[str, str]
    ts: float
    value: float


@dataclass(frozen=True, slots=True)
class TargetInfo:
    """A scraped endpoint or node. ``node``, ``pool`` and ``model`` come from its labels."""

    id: int
    name: str
    kind: str
    url: str
    labels: Mapping[str, str]
    node: str | None
    pool: str | None
    model: str | None
    created_at: float
    last_seen_at: float | None


@dataclass(frozen=True, slots=True)
class BenchRunMeta:
    """What a benchmark run was: where, which model, which workload, with which settings."""

    name: str
    url: str
    model: str
    workload: str
    started_at: float
    ended_at: float | None = None
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BenchRunInfo:
    """A stored run without its per-request records."""

    run_id: int
    meta: BenchRunMeta
    num_requests: int
    summary: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class BenchRunData:
    """A stored run with every request record, in the order they were saved."""

    meta: BenchRunMeta
    records: Sequence[RequestRecord]
    summary: Mapping[str, Any]
    run_id: int


@dataclass(frozen=True, slots=True)
class StudyInfo:
    """slotune's side of an Optuna study (the trials live in Optuna's own tables)."""

    name: str  # also the Optuna study's name
    backend: str
    engine: str
    model: str
    gpu: str
    workload: str
    objective: str
    slos: Sequence[str] = ()
    status: StudyStatus = StudyStatus.RUNNING
    result: Mapping[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class DiagnosisInfo:
    """An analysis result with the inputs it came from."""

    id: int
    kind: str
    subject: str
    inputs: Mapping[str, Any]
    result: Mapping[str, Any]
    created_at: float


@dataclass(frozen=True, slots=True)
class AlertRuleInfo:
    """An alert rule: ``kind`` ``slo_burn`` (with ``slo_name``) or ``threshold``
    (``metric`` ``op`` ``threshold`` held for ``for_s``)."""

    name: str
    kind: str
    slo_name: str | None = None
    metric: str | None = None
    op: str | None = None
    threshold: float | None = None
    for_s: float = 0.0
    severity: str = "warning"
    labels: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class AlertEventInfo:
    """A rule's state change (firing or resolved) with the value that caused it."""

    rule: str
    state: AlertState
    ts: float
    value: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True, slots=True)
class RetentionCounts:
    """Rows deleted (prune) or rolled up (rollup), per table."""

    samples: int = 0
    rollups: int = 0
    counter_resets: int = 0
    alert_events: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "samples": self.samples,
            "rollups": self.rollups,
            "counter_resets": self.counter_resets,
            "alert_events": self.alert_events,
        }
