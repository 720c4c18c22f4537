"""What a simulation produces: request records, timings, engine time series, step split."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slotune.collector.records import RequestRecord
from slotune.collector.run_figures import StepBreakdown
from slotune.collector.summary import Summary


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """One request's path through the engine (seconds from the trace start).

    Attributes:
        request_id: id within the run.
        arrival_s: when the request reached the engine.
        scheduled_s: start of the first step that computed any of its tokens (None if never).
        first_token_s: end of the step that produced its first token.
        finished_s: end of the step that produced its last token.
        preemptions: times its KV was freed and recomputed.
        finish_reason: vLLM's ``finish_reason`` ("stop" at EOS, "length" at
            ``max_tokens``); None when it did not finish.
    """

    request_id: str
    arrival_s: float
    scheduled_s: float | None
    first_token_s: float | None
    finished_s: float | None
    preemptions: int = 0
    finish_reason: str | None = None

    @property
    def num_preemptions(self) -> int:
        """Former name of ``preemptions`` (the store's name), kept for callers."""
        return self.preemptions

    @property
    def queued_s(self) -> float | None:
        """Arrival -> first scheduled step."""
        return None if self.scheduled_s is None else self.scheduled_s - self.arrival_s


@dataclass(frozen=True, slots=True)
class EngineSeries:
    """Engine gauges and cumulative counters sampled at a coarse interval (columns).

    Named as the store names the scraped engine metrics (``requests_running`` …).
    """

    time_s: tuple[float, ...]
    requests_running: tuple[int, ...]
    requests_waiting: tuple[int, ...]
    kv_usage: tuple[float, ...]
    prefix_queries: tuple[int, ...]
    prefix_hits: tuple[int, ...]
    preemptions: tuple[int, ...]

    @property
    def num_running(self) -> tuple[int, ...]:
        """Former name of ``requests_running``, kept for callers."""
        return self.requests_running

    @property
    def num_waiting(self) -> tuple[int, ...]:
        """Former name of ``requests_waiting``, kept for callers."""
        return self.requests_waiting

    def to_dict(self) -> dict[str, list[Any]]:
        return {name: list(getattr(self, name)) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class SimResult:
    """The outcome of :func:`tuner.sim.simulate`.

    Attributes:
        records: one record per request, every token its own chunk at its exact time.
        summary: the summary shared with ``slotune bench``, plus ``prefix_hit_rate``,
            ``preemptions``, ``kv_blocks``, ``kv_tokens`` and ``step_time_breakdown``.
        timings: per-request arrival, scheduled, first token and finish times.
        series: engine time series.
        breakdown: the step-time split.
        config: the resolved engine parameters by the engine's names.
        kv_log: the engine's start-up KV-cache log lines.
    """

    records: list[RequestRecord]
    summary: Summary
    timings: list[RequestTiming]
    series: EngineSeries
    breakdown: StepBreakdown
    config: dict[str, Any]
    kv_log: list[str]

    def to_dict(self, *, include_series: bool = False) -> dict[str, Any]:
        """JSON-ready ``{"summary", "config", "kv_log"}`` (+ ``series`` on request)."""
        out: dict[str, Any] = {
            "summary": self.summary.to_dict(),
            "config": dict(self.config),
            "kv_log": list(self.kv_log),
        }
        if include_series:
            out["series"] = self.series.to_dict()
        return out
