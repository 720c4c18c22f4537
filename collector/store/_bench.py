"""Benchmark runs and their per-request records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, insert, select

from slotune.collector.errors import ConfigError
from slotune.collector.records import RequestRecord
from slotune.collector.store._models import BenchRequest, BenchRun
from slotune.collector.store._records import BenchRunData, BenchRunInfo, BenchRunMeta
from slotune.collector.store._store import Store


def save_bench_run(
    store: Store, meta: BenchRunMeta, records: Sequence[RequestRecord], summary: Mapping[str, Any]
) -> int:
    """Store one run with every request record in one transaction.

    Args:
        store: the open store.
        meta: what was run.
        records: per-request records (request ids unique within the run).
        summary: the run summary JSON (``collector.summary.Summary.to_dict()``).

    Returns:
        The run id.

    Raises:
        ConfigError: two records share a request id.
    """
    ids = [r.request_id for r in records]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"run {meta.name!r}: request ids must be unique within a run")
    with store.session() as session:
        run = BenchRun(
            name=meta.name,
            url=meta.url,
            model=meta.model,
            workload=meta.workload,
            config=dict(meta.config),
            started_at=meta.started_at,
            ended_at=meta.ended_at,
            num_requests=len(records),
            summary=dict(summary),
        )
        session.add(run)
        session.flush()
        if records:
            session.execute(
                insert(BenchRequest), [_request_row(run.id, i, r) for i, r in enumerate(records)]
            )
        return run.id


def _request_row(run_id: int, seq: int, r: RequestRecord) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "request_id": r.request_id,
        "seq": seq,
        "send_s": r.send_s,
        "scheduled_s": r.scheduled_s,
        "first_token_s": r.first_token_s,
        "end_s": r.end_s,
        "chunk_times_s": list(r.chunk_times_s),
        "chunk_tokens": list(r.chunk_tokens),
        "input_tokens": r.input_tokens,
        "output_tokens": r.output_tokens,
        "http_status": r.http_status,
        "error": r.error,
        "error_detail": r.error_detail,
        "untimed": {
            "chunks": r.num_untimed_chunks,
            "tokens": r.num_untimed_tokens,
            "gap_counts": list(r.untimed_gap_counts),
        }
        if r.num_untimed_chunks
        else None,
    }


def _meta(run: BenchRun) -> BenchRunMeta:
    return BenchRunMeta(
        name=run.name,
        url=run.url,
        model=run.model,
        workload=run.workload,
        started_at=run.started_at,
        ended_at=run.ended_at,
        config=dict(run.config),
    )


def load_bench_run(store: Store, run_id: int) -> BenchRunData:
    """A stored run with its records.

    Raises:
        ConfigError: no run has this id.
    """
    with store.session() as session:
        run = session.get(BenchRun, run_id)
        if run is None:
            raise ConfigError(f"no benchmark run with id {run_id} in {store.url}; check the run id")
        rows = session.scalars(
            select(BenchRequest).where(BenchRequest.run_id == run_id).order_by(BenchRequest.seq)
        ).all()
        records = [
            RequestRecord(
                request_id=r.request_id,
                send_s=r.send_s,
                first_token_s=r.first_token_s,
                end_s=r.end_s,
                chunk_times_s=tuple(r.chunk_times_s),
                chunk_tokens=tuple(r.chunk_tokens),
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                error=r.error,
                error_detail=r.error_detail,
                http_status=r.http_status,
                scheduled_s=r.scheduled_s,
                **_untimed(r.untimed),
            )
            for r in rows
        ]
        return BenchRunData(
            meta=_meta(run), records=records, summary=dict(run.summary), run_id=run.id
        )


def list_bench_runs(store: Store, limit: int | None = None) -> list[BenchRunInfo]:
    """Stored runs, newest first, without their records."""
    with store.session() as session:
        query = select(BenchRun).order_by(BenchRun.started_at.desc(), BenchRun.id.desc())
        if limit is not None:
            query = query.limit(limit)
        return [
            BenchRunInfo(
                run_id=r.id, meta=_meta(r), num_requests=r.num_requests, summary=dict(r.summary)
            )
            for r in session.scalars(query)
        ]


def count_bench_requests(store: Store, run_id: int) -> int:
    """How many request records run ``run_id`` holds."""
    with store.session() as session:
        return (
            session.scalar(
                select(func.count()).select_from(BenchRequest).where(BenchRequest.run_id == run_id)
            )
            or 0
        )


def _untimed(stored: dict[str, Any] | None) -> dict[str, Any]:
    if not stored:
        return {}
    return {
        "num_untimed_chunks": int(stored["chunks"]),
        "num_untimed_tokens": int(stored["tokens"]),
        "untimed_gap_counts": tuple(int(n) for n in stored["gap_counts"]),
    }
