"""Benchmark runs in the store, and runs saved as JSON files with ``--save``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotune.collector.bench.result import BenchResult
from slotune.collector.errors import ConfigError
from slotune.collector.jsonfile import read_json
from slotune.collector.redact import redact_url
from slotune.collector.store import (
    BenchRunInfo,
    BenchRunMeta,
    Store,
    list_bench_runs,
    load_bench_run,
    open_store,
    save_bench_run,
)
from slotune.collector.textfile import read_text


def run_name(result: BenchResult) -> str:
    """The given run name, else model and arrival process."""
    return result.config.name or f"{result.model} {result.config.arrival.describe()}"


def check_store(db_url: str | None) -> None:
    """Fail before a long run, not after it, when the store cannot be used."""
    with open_store(db_url):
        pass


def save_run(db: Store | str | None, result: BenchResult, name: str | None = None) -> int:
    """Store a run and its measured request records.

    Args:
        db: an open store, or a store URL (None: the default store) opened for this call.
        result: the finished run.
        name: the run's name (default: :func:`run_name`).

    Returns:
        The run id.
    """
    if not isinstance(db, Store):
        with open_store(db) as store:
            return save_run(store, result, name)
    config = {**result.config.to_dict(), "wall_offset_s": result.wall_offset_s}
    meta = BenchRunMeta(
        name=name or run_name(result),
        url=redact_url(result.config.url),
        model=result.model,
        workload=result.config.workload_name,
        started_at=result.started_at,
        ended_at=result.ended_at,
        config=config,
    )
    return save_bench_run(db, meta, list(result.records), result.summary.to_dict())


def list_runs(db_url: str | None, limit: int | None = None) -> list[BenchRunInfo]:
    """Stored runs, newest first."""
    with open_store(db_url) as store:
        return list_bench_runs(store, limit)


@dataclass(frozen=True, slots=True)
class RunRef:
    """A run picked for comparison: its label and summary JSON."""

    label: str
    summary: Mapping[str, Any]


def resolve_run(db_url: str | None, ref: str) -> RunRef:
    """A stored run id, or a JSON file written by ``slotune bench --save``.

    Raises:
        ConfigError: neither an id in the store nor a readable result file.
    """
    path = Path(ref)
    if path.exists():
        text = read_text(path, "result file written by --save")
        data = read_json(text, source=ref)
        if not isinstance(data, dict) or not isinstance(data.get("summary"), dict):
            raise ConfigError(f"{ref}: has no 'summary'; give a file written by --save")
        return RunRef(label=str(data.get("name") or path.name), summary=data["summary"])
    if not ref.isdigit():
        raise ConfigError(f"{ref!r} is neither a run id (see slotune bench list) nor a file")
    with open_store(db_url) as store:
        run = load_bench_run(store, int(ref))
    return RunRef(label=f"#{run.run_id} {run.meta.name}", summary=run.summary)
