"""Tuning-study metadata (the trials themselves live in Optuna's tables)."""

from __future__ import annotations

import time

from sqlalchemy import select

from slotune.collector.errors import ConfigError
from slotune.collector.store._models import TuningStudy
from slotune.collector.store._records import StudyInfo, StudyStatus
from slotune.collector.store._store import Store


def save_study(store: Store, info: StudyInfo) -> int:
    """Create or update a study by name; returns its id.

    Raises:
        ConfigError: ``status`` is not a :class:`StudyStatus` value.
    """
    try:
        status = StudyStatus(info.status)
    except ValueError as e:
        raise ConfigError(
            f"study {info.name!r}: status {info.status!r} is unknown; use one of "
            f"{', '.join(s.value for s in StudyStatus)}"
        ) from e
    with store.session() as session:
        row = session.scalars(
            select(TuningStudy).where(TuningStudy.name == info.name)
        ).one_or_none()
        if row is None:
            row = TuningStudy(name=info.name, created_at=info.created_at)
            session.add(row)
        row.backend, row.engine = info.backend, info.engine
        row.model, row.gpu, row.workload = info.model, info.gpu, info.workload
        row.objective, row.slos, row.status = info.objective, list(info.slos), status.value
        row.result, row.updated_at = dict(info.result), time.time()
        session.flush()
        return row.id


def _info(row: TuningStudy) -> StudyInfo:
    return StudyInfo(
        name=row.name,
        backend=row.backend,
        engine=row.engine,
        model=row.model,
        gpu=row.gpu,
        workload=row.workload,
        objective=row.objective,
        slos=tuple(row.slos),
        status=StudyStatus(row.status),
        result=dict(row.result),
        created_at=row.created_at,
    )


def list_studies(store: Store) -> list[StudyInfo]:
    """Every study, newest first."""
    with store.session() as session:
        rows = session.scalars(select(TuningStudy).order_by(TuningStudy.created_at.desc()))
        return [_info(r) for r in rows]


def get_study(store: Store, name: str) -> StudyInfo | None:
    """The study named ``name``, or None."""
    with store.session() as session:
        row = session.scalars(select(TuningStudy).where(TuningStudy.name == name)).one_or_none()
        return None if row is None else _info(row)
