"""Study workers: the processes that run studies started from the dashboard.

A worker writes its row when it starts, touches ``heartbeat_at`` while it runs and records
how it ended, so any dashboard (after a reload, a restart, or on another machine) can tell a
running study from one whose process died.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import select, update

from slotune.collector.store._models import StudyWorkerRow
from slotune.collector.store._store import Store


class WorkerState(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One study's worker process.

    Attributes:
        study_name: the study it runs.
        pid: process id on ``host``.
        host: the machine's host name.
        state: a :class:`WorkerState`.
        error: why it failed (one line), empty otherwise.
        started_at: epoch seconds.
        heartbeat_at: last sign of life, epoch seconds.
        ended_at: when it stopped (None while running).
    """

    study_name: str
    pid: int
    host: str
    state: WorkerState
    started_at: float
    heartbeat_at: float
    error: str = ""
    ended_at: float | None = None


def save_worker(store: Store, info: WorkerInfo) -> None:
    """Create or replace the worker row of a study."""
    with store.session() as session:
        row = session.scalars(
            select(StudyWorkerRow).where(StudyWorkerRow.study_name == info.study_name)
        ).one_or_none()
        if row is None:
            row = StudyWorkerRow(study_name=info.study_name)
            session.add(row)
        row.pid, row.host, row.state = info.pid, info.host, WorkerState(info.state).value
        row.error, row.started_at = info.error, info.started_at
        row.heartbeat_at, row.ended_at = info.heartbeat_at, info.ended_at


def touch_worker(store: Store, study_name: str, ts: float | None = None) -> None:
    """Advance a running worker's heartbeat."""
    with store.session() as session:
        session.execute(
            update(StudyWorkerRow)
            .where(StudyWorkerRow.study_name == study_name)
            .values(heartbeat_at=time.time() if ts is None else ts)
        )


def _info(row: StudyWorkerRow) -> WorkerInfo:
    return WorkerInfo(
        study_name=row.study_name,
        pid=row.pid,
        host=row.host,
        state=WorkerState(row.state),
        started_at=row.started_at,
        heartbeat_at=row.heartbeat_at,
        error=row.error,
        ended_at=row.ended_at,
    )


def get_worker(store: Store, study_name: str) -> WorkerInfo | None:
    """The worker of a study, or None when the study was not started from the dashboard."""
    with store.session() as session:
        row = session.scalars(
            select(StudyWorkerRow).where(StudyWorkerRow.study_name == study_name)
        ).one_or_none()
        return None if row is None else _info(row)


def list_workers(store: Store) -> list[WorkerInfo]:
    """Every worker, newest first."""
    with store.session() as session:
        rows = session.scalars(select(StudyWorkerRow).order_by(StudyWorkerRow.started_at.desc()))
        return [_info(r) for r in rows]
