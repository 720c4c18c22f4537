"""A finished run: its measured records, summary and the bench-only figures."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from slotune.collector.bench.client import ClientResult
from slotune.collector.bench.config import BenchConfig
from slotune.collector.bench.plan import Plan
from slotune.collector.records import RequestRecord
from slotune.collector.run_figures import LoadFigures, SendLag
from slotune.collector.summary import Summary, summarize


@dataclass(frozen=True, slots=True)
class BenchResult:
    """One finished run.

    Attributes:
        records: the measured requests, in send order.
        summary: their summary (the shared schema, with its ``load`` figures).
        offered_rate: scheduled rate of the measured requests (None in a closed loop).
        achieved_rate: rate at which they were actually sent.
        config: the settings.
        model: the model that was asked.
        started_at: wall-clock start (epoch seconds).
        ended_at: wall-clock end.
        wall_offset_s: add to a record's time to get epoch seconds.
    """

    records: tuple[RequestRecord, ...]
    summary: Summary
    offered_rate: float | None
    achieved_rate: float | None
    config: BenchConfig
    model: str
    started_at: float
    ended_at: float
    wall_offset_s: float

    def to_dict(self, *, with_records: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.config.name,
            "model": self.model,
            "workload": self.config.workload_name,
            "config": self.config.to_dict(),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "wall_offset_s": self.wall_offset_s,
            "summary": self.summary.to_dict(),
        }
        if with_records:
            out["records"] = [_record_dict(r) for r in self.records]
        return out


# Exit statuses of ``slotune bench`` beyond 0 (1 is any error, as for every command).
EXIT_ALL_FAILED = 1
EXIT_SLO_MISSED = 3


def run_failure(summary: Summary, *, fail_on_slo: bool = False) -> tuple[int, str] | None:
    """Why a finished run should fail a script that ran it, with the exit status; else None.

    A run in which no measured request completed measured nothing (a wrong ``--served-model-name`` gives
    100 % HTTP 4xx); with ``fail_on_slo`` a missed SLO fails it too (for CI gates).
    """
    if summary.num_completed == 0:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(summary.errors_by_kind.items()))
        return EXIT_ALL_FAILED, (
            f"every measured request failed ({kinds or 'none was sent'}); check --url, "
            "--served-model-name and the server's log (the records show each error)"
        )
    missed = [a for a in summary.slo_attainment if not a.is_met]
    if fail_on_slo and missed:
        names = ", ".join(a.slo.name for a in missed)
        return EXIT_SLO_MISSED, f"SLO missed: {names} (--fail-on-slo)"
    return None


def _record_dict(r: RequestRecord) -> dict[str, Any]:
    return {f: getattr(r, f) for f in RequestRecord.__slots__}


def build_result(
    config: BenchConfig,
    plan: Plan,
    results: list[ClientResult],
    model: str,
    started_at: float,
    wall_offset_s: float,
    *,
    num_cooldown: int,
    num_cooldown_cancelled: int,
) -> BenchResult:
    records = [r.record for r in results]
    sends = np.array([r.send_s for r in records])
    achieved = (
        (len(sends) - 1) / float(sends.max() - sends.min())
        if len(sends) > 1 and sends.max() > sends.min()
        else None
    )
    lags = [r.send_s - r.scheduled_s for r in records if r.scheduled_s is not None]
    num_warmup = min(plan.num_warmup, len(plan.trace))
    with_usage = [r for r in results if r.record.output_tokens is not None]
    load = LoadFigures(
        target_rate=config.arrival.rate,
        offered_rate=plan.offered_rate,
        achieved_rate=achieved,
        send_lag_ms=_lag_ms(lags),
        num_warmup=num_warmup,
        num_cooldown=num_cooldown,
        num_cooldown_cancelled=num_cooldown_cancelled,
        # every request that reached the server, measured or not: what it was billed for
        num_sent=num_warmup + len(records) + num_cooldown,
        usage_missing=sum(1 for r in records if r.is_ok and r.output_tokens is None),
        client_token_mismatches=sum(
            1 for r in with_usage if r.client_output_tokens != r.record.output_tokens
        ),
    )
    summary = summarize(records, config.slos, load=load)
    return BenchResult(
        records=tuple(records),
        summary=summary,
        offered_rate=plan.offered_rate,
        achieved_rate=achieved,
        config=config,
        model=model,
        started_at=started_at,
        ended_at=time.time(),
        wall_offset_s=wall_offset_s,
    )


def _lag_ms(lags: list[float]) -> SendLag | None:
    if not lags:
        return None
    a = np.asarray(lags) * 1000.0
    return SendLag(float(np.percentile(a, 50)), float(np.percentile(a, 99)), float(a.max()))
