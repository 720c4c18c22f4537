"""How an SLO fares over a set of requests: good events against all, and the aggregate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from slotune.collector.records import RequestRecord
from slotune.collector.slo._model import SLI, SLO
from slotune.collector.stats import weighted_percentile


@dataclass(frozen=True, slots=True)
class Attainment:
    """How one SLO fared over a set of requests.

    Attributes:
        slo: the SLO.
        num_good: good events (``slo.sli.event``: token gaps for ``itl``, else requests).
        num_total: all events.
        value: the aggregate: the observed percentile in seconds, or the error rate.
    """

    slo: SLO
    num_good: int
    num_total: int
    value: float | None

    @property
    def attainment(self) -> float:
        return self.num_good / self.num_total if self.num_total else 0.0

    @property
    def is_met(self) -> bool:
        if self.num_total == 0:
            return False
        if self.slo.sli is SLI.ERROR_RATE:
            return self.value is not None and self.value <= self.slo.threshold
        return self.attainment >= self.slo.objective - 1e-12

    def to_dict(self) -> dict[str, Any]:
        unit_ms = self.slo.sli is not SLI.ERROR_RATE
        return {
            "name": self.slo.name,
            "spec": self.slo.spec,
            "attainment": self.attainment,
            "objective": self.slo.objective,
            "met": self.is_met,
            "value": (self.value * 1000 if unit_ms else self.value)
            if self.value is not None
            else None,
            "unit": "ms" if unit_ms else "ratio",
            "event": self.slo.sli.event,
            "num_good": self.num_good,
            "num_total": self.num_total,
        }


def evaluate(slo: SLO, records: list[RequestRecord]) -> Attainment:
    """Good fraction and aggregate value of one SLO over finished and failed requests.

    ``itl`` counts the token gaps of the completed requests, pooled (each gap weighted by its
    chunk's tokens), exactly as the engine's histogram and the summary's ``itl_ms`` do.
    """
    total = len(records)
    if slo.sli is SLI.ERROR_RATE:
        bad = sum(1 for r in records if not r.is_ok)
        return Attainment(slo, total - bad, total, bad / total if total else None)
    if slo.sli is SLI.ITL:
        gaps, tokens = pooled_itl_gaps([r for r in records if r.is_ok])
        value = weighted_percentile(gaps, tokens, slo.percentile or 99.0) if gaps.size else None
        num_good = int(tokens[gaps <= slo.threshold].sum())
        return Attainment(slo, num_good, int(tokens.sum()), value)
    good = sum(1 for r in records if slo.is_good(r))
    values = [v for r in records if r.is_ok and (v := slo.value_of(r)) is not None]
    agg = float(np.percentile(values, slo.percentile or 99.0)) if values else None
    return Attainment(slo, good, total, agg)


def pooled_itl_gaps(records: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Every record's ``itl_gaps_s()`` pooled in record order, as (gaps, tokens) arrays.

    Same values as looping over ``itl_gaps_s()``, computed on all chunks at once: a
    simulated run carries millions of chunks, which a per-chunk loop takes seconds to walk.
    """
    lengths = [min(len(r.chunk_times_s), len(r.chunk_tokens)) for r in records]
    times = np.fromiter(
        chain.from_iterable(r.chunk_times_s[:k] for r, k in zip(records, lengths, strict=True)),
        dtype=float,
        count=sum(lengths),
    )
    tokens = np.fromiter(
        chain.from_iterable(r.chunk_tokens[:k] for r, k in zip(records, lengths, strict=True)),
        dtype=np.int64,
        count=sum(lengths),
    )
    owner = np.repeat(np.arange(len(records)), lengths)
    keep = tokens > 0
    times, tokens, owner = times[keep], tokens[keep], owner[keep]
    same = owner[1:] == owner[:-1]
    return ((times[1:] - times[:-1]) / tokens[1:])[same], tokens[1:][same]
