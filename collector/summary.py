"""The run summary shared by ``slotune bench`` and ``slotune sim``.

Metric definitions (also in docs/metrics.md):

- ``ttft``: send -> first chunk carrying at least one token.
- ``itl``: gap between consecutive token-carrying chunks divided by that chunk's tokens,
  pooled over all tokens of all requests (vLLM's server-side definition).
- ``tpot``: per request, (e2e - ttft) / (output_tokens - 1).
- ``e2e``: send -> last byte.
- ``goodput``: completed requests per second meeting every per-request SLO (``ttft``,
  ``tpot``, ``e2e``, as ``vllm bench serve --goodput``); an ``itl`` SLO is pooled over the
  run's token gaps, so it holds or breaks for the run as a whole (``slo_attainment``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slotune.collector.records import RequestRecord
from slotune.collector.run_figures import (
    FleetFigures,
    LoadFigures,
    ScrapedEngineFigures,
    SimEngineFigures,
)
from slotune.collector.slo import SLI, SLO, Attainment, evaluate, parse_slo, pooled_itl_gaps

PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary statistics of one latency metric, in milliseconds."""

    count: int
    mean: float | None
    std: float | None
    percentiles: dict[float, float | None]

    @classmethod
    def of(
        cls,
        values_s: Sequence[float] | np.ndarray,
        weights: Sequence[int] | np.ndarray | None = None,
    ) -> Distribution:
        v = np.asarray(values_s, dtype=float) * 1000.0
        if v.size == 0:
            return cls(0, None, None, dict.fromkeys(PERCENTILES))
        if weights is not None:
            w = np.asarray(weights, dtype=np.int64)
            if not np.all(w == 1):
                v = np.repeat(v, w)
        pct = np.percentile(v, PERCENTILES)
        return cls(
            int(v.size),
            float(v.mean()),
            float(v.std()),
            {p: float(x) for p, x in zip(PERCENTILES, pct, strict=True)},
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mean": self.mean}
        for p, x in self.percentiles.items():
            out[f"p{p:g}"] = x
        out["std"] = self.std
        out["count"] = self.count
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Distribution:
        """The distribution of its JSON form; a percentile the JSON lacks reads as None."""
        return cls(
            count=int(d.get("count", 0)),
            mean=_opt(d.get("mean")),
            std=_opt(d.get("std")),
            percentiles={p: _opt(d.get(f"p{p:g}")) for p in PERCENTILES},
        )

    @property
    def p50(self) -> float | None:
        return self.percentiles.get(50.0)

    @property
    def p99(self) -> float | None:
        return self.percentiles.get(99.0)


@dataclass(frozen=True, slots=True)
class Summary:
    """Results of one run (client-measured or simulated).

    Beside the latencies, each kind of run carries its own figures (:mod:`collector.run_figures`):
    ``load`` a benchmark's, ``engine`` a simulated engine's, ``fleet`` a simulated fleet's,
    ``scraped`` a real engine's metrics over the run; ``queue_growth`` is the steady-state
    check's figure (:mod:`tuner.tune.steady`). The JSON holds them flat, as it always has.
    """

    duration_s: float
    num_requests: int
    num_completed: int
    num_errors: int
    errors_by_kind: dict[str, int]
    ttft_ms: Distribution
    itl_ms: Distribution
    tpot_ms: Distribution
    e2e_ms: Distribution
    request_throughput: float
    output_token_throughput: float
    input_token_throughput: float
    total_input_tokens: int
    total_output_tokens: int
    goodput: float
    slo_attainment: tuple[Attainment, ...] = ()
    load: LoadFigures | None = None
    engine: SimEngineFigures | None = None
    fleet: FleetFigures | None = None
    queue_growth: float | None = None
    scraped: ScrapedEngineFigures | None = None

    @property
    def all_slos_met(self) -> bool:
        return all(a.is_met for a in self.slo_attainment)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "duration_s": self.duration_s,
            "num_requests": self.num_requests,
            "num_completed": self.num_completed,
            "num_errors": self.num_errors,
            "errors_by_kind": dict(self.errors_by_kind),
            "ttft_ms": self.ttft_ms.to_dict(),
            "itl_ms": self.itl_ms.to_dict(),
            "tpot_ms": self.tpot_ms.to_dict(),
            "e2e_ms": self.e2e_ms.to_dict(),
            "request_throughput": self.request_throughput,
            "output_token_throughput": self.output_token_throughput,
            "input_token_throughput": self.input_token_throughput,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "goodput": self.goodput,
            "slo_attainment": [a.to_dict() for a in self.slo_attainment],
            "slos_met": self.all_slos_met,
        }
        for figures in (self.load, self.engine, self.fleet):
            if figures is not None:
                out.update(figures.to_dict())
        if self.queue_growth is not None:
            out["queue_growth"] = self.queue_growth
        if self.scraped is not None:
            out.update(self.scraped.to_dict())
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Summary:
        """The summary of its JSON form (the CLI's ``--json``, a stored run).

        Which figures a run carries is read from their keys. Each SLO is read back from its
        shorthand and name, the only parts of it a summary holds.
        """
        growth = d.get("queue_growth")
        return cls(
            duration_s=float(d["duration_s"]),
            num_requests=int(d["num_requests"]),
            num_completed=int(d["num_completed"]),
            num_errors=int(d["num_errors"]),
            errors_by_kind={str(k): int(v) for k, v in (d.get("errors_by_kind") or {}).items()},
            ttft_ms=Distribution.from_dict(d.get("ttft_ms") or {}),
            itl_ms=Distribution.from_dict(d.get("itl_ms") or {}),
            tpot_ms=Distribution.from_dict(d.get("tpot_ms") or {}),
            e2e_ms=Distribution.from_dict(d.get("e2e_ms") or {}),
            request_throughput=float(d["request_throughput"]),
            output_token_throughput=float(d["output_token_throughput"]),
            input_token_throughput=float(d["input_token_throughput"]),
            total_input_tokens=int(d["total_input_tokens"]),
            total_output_tokens=int(d["total_output_tokens"]),
            goodput=float(d["goodput"]),
            slo_attainment=tuple(_attainment(a) for a in d.get("slo_attainment") or ()),
            load=LoadFigures.from_dict(d) if "target_rate" in d else None,
            engine=SimEngineFigures.from_dict(d) if "kv_blocks" in d else None,
            fleet=FleetFigures.from_dict(d) if "shed" in d else None,
            queue_growth=None if growth is None else float(growth),
            scraped=ScrapedEngineFigures.from_dict(d) if "engine_samples" in d else None,
        )


def summarize(
    records: Sequence[RequestRecord],
    slos: Sequence[SLO] = (),
    *,
    duration_s: float | None = None,
    load: LoadFigures | None = None,
    engine: SimEngineFigures | None = None,
    fleet: FleetFigures | None = None,
) -> Summary:
    """Compute the summary of a set of request records.

    Args:
        records: every request of the measured window, failed ones included.
        slos: SLOs for goodput and attainment.
        duration_s: the measured window; default first send -> last end.
        load, engine, fleet: the figures of this kind of run to carry along.
    """
    ok = [r for r in records if r.is_ok]
    if duration_s is None:
        duration_s = _span(records)
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    e2e = [r.e2e_s for r in ok if r.e2e_s is not None]
    tpot = [t for r in ok if (t := r.tpot_s) is not None]
    gaps, weights = pooled_itl_gaps(ok)
    out_tokens = sum(r.num_output_tokens for r in ok)
    in_tokens = sum(r.input_tokens for r in ok)
    per_req_slos = [s for s in slos if s.sli.is_per_request]
    num_good = sum(1 for r in ok if all(s.is_good(r) for s in per_req_slos))
    errors = Counter(r.error or "unfinished" for r in records if not r.is_ok)
    span = duration_s

    def rate(x: float) -> float:
        return x / span if span and span > 0 else 0.0

    return Summary(
        duration_s=duration_s,
        num_requests=len(records),
        num_completed=len(ok),
        num_errors=len(records) - len(ok),
        errors_by_kind=dict(errors),
        ttft_ms=Distribution.of(ttft),
        itl_ms=Distribution.of(gaps, weights),
        tpot_ms=Distribution.of(tpot),
        e2e_ms=Distribution.of(e2e),
        request_throughput=rate(len(ok)),
        output_token_throughput=rate(out_tokens),
        input_token_throughput=rate(in_tokens),
        total_input_tokens=in_tokens,
        total_output_tokens=out_tokens,
        goodput=rate(num_good),
        slo_attainment=tuple(evaluate(s, list(records)) for s in slos),
        load=load,
        engine=engine,
        fleet=fleet,
    )


def _span(records: Sequence[RequestRecord]) -> float:
    if not records:
        return 0.0
    start = min(r.send_s for r in records)
    ends = [r.end_s for r in records if r.end_s is not None]
    return (max(ends) - start) if ends else 0.0


def _attainment(d: Mapping[str, Any]) -> Attainment:
    slo = parse_slo(str(d["spec"]), name=str(d["name"]))
    value = d.get("value")
    if value is not None and slo.sli is not SLI.ERROR_RATE:
        value = float(value) / 1000.0
    return Attainment(slo, int(d["num_good"]), int(d["num_total"]), value)


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)
