"""``slotune bench`` end to end: measure (one run, or the max-rate search), store the runs,
write the files asked for.

The store is checked before anything is sent, so a bad ``--db`` costs no measurement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotune.collector.bench.config import BenchConfig
from slotune.collector.bench.persist import check_store, run_name, save_run
from slotune.collector.bench.result import BenchResult
from slotune.collector.bench.runner import run_benchmark
from slotune.collector.bench.search import MaxRateRun, search_max_rate
from slotune.collector.textfile import write_text


@dataclass(frozen=True, slots=True)
class Outputs:
    """Where a benchmark goes besides the screen.

    Attributes:
        db_url: the store (None: the default SQLite file).
        store: save the runs in the store.
        save: write the result JSON (with every request record) here.
        requests_out: write the measured requests as JSONL here (``sim calibrate
            --observed``); one run only.
    """

    db_url: str | None = None
    store: bool = True
    save: Path | None = None
    requests_out: Path | None = None


@dataclass(frozen=True, slots=True)
class Measured:
    """One run, and its id in the store (None: not stored)."""

    result: BenchResult
    run_id: int | None

    def to_dict(self) -> dict[str, Any]:
        return {**self.result.to_dict(), "run_id": self.run_id}


@dataclass(frozen=True, slots=True)
class MaxRateMeasured:
    """The max-rate search, the config it searched with, and the stored id of each run."""

    found: MaxRateRun
    config: BenchConfig
    run_ids: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.found.result.to_dict(),
            "config": self.config.to_dict(),
            "run_ids": list(self.run_ids),
        }


def measure(config: BenchConfig, outputs: Outputs, *, progress: bool = False) -> Measured:
    """Run the benchmark, store it, write the files.

    Raises:
        ConfigError: bad input (requests longer than the model's context included).
        StoreError: the store cannot be opened, before anything is sent.
    """
    if outputs.store:
        check_store(outputs.db_url)
    result = run_benchmark(config, progress=progress, refuse_over_context=True)
    run_id = save_run(outputs.db_url, result, config.name) if outputs.store else None
    _save(outputs.save, result.to_dict(with_records=True))
    if outputs.requests_out is not None:
        from slotune.collector.observed import write_observed

        write_observed(result.records, outputs.requests_out)
    return Measured(result, run_id)


def measure_max_rate(
    config: BenchConfig,
    outputs: Outputs,
    *,
    rel_tolerance: float,
    max_steps: int,
    progress: bool = False,
) -> MaxRateMeasured:
    """Search the highest rate meeting every SLO; store each run measured on the way.

    ``outputs.requests_out`` is not written: a search measures many runs.

    Raises:
        ConfigError: bad input.
        StoreError: the store cannot be opened, before anything is sent.
    """
    if outputs.store:
        check_store(outputs.db_url)
    found = search_max_rate(
        config, rel_tolerance=rel_tolerance, max_steps=max_steps, progress=progress
    )
    run_ids = (
        tuple(save_run(outputs.db_url, r, f"{run_name(r)} (max-rate)") for r in found.runs)
        if outputs.store
        else ()
    )
    measured = MaxRateMeasured(found, config, run_ids)
    _save(outputs.save, measured.to_dict())
    return measured


def _save(path: Path | None, data: dict[str, Any]) -> None:
    if path is None:
        return
    write_text(path, json.dumps(data, indent=1, default=str) + "\n", "--save result file")
