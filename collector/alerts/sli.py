"""SLIs as good / total request counts over a window, from what the store holds.

One semantics everywhere (docs/slo.md): a request is good when its value is within the
threshold.

- **Engine histograms** (scraped by the agent, canonical ``ttft`` / ``itl`` / ``tpot`` /
  ``e2e``): good = increase of ``F_bucket{le=T}``, total = increase of ``F_bucket{le=+Inf}``,
  reset-aware, summed over every series the SLO's selector matches. When ``T`` is not a
  bucket bound, the bound at or below ``T`` is used (conservative: requests between it and
  ``T`` count as bad) unless the SLO says ``interpolate: true`` (linear between the two
  nearest bounds); either way a :class:`BoundaryNote` says so. Engine ``itl`` histograms
  observe every token gap, so there the SLI is the share of *token gaps* within ``T``.
- **Availability** (``error_rate``): ``requests_finished{finished_reason}`` (vLLM's
  ``request_success_total``, TensorRT-LLM's equivalent): ``abort`` and ``error`` are bad.
- **Benchmark records**: the exact per-request SLI of ``collector.slo.evaluate``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from slotune.collector.records import RequestRecord
from slotune.collector.slo import SLI, SLO, Selector, evaluate
from slotune.collector.store import (
    SeriesRef,
    Store,
    find_series,
    increases,
    parse_le,
    values_at,
)

FINISHED = "requests_finished"
BAD_REASONS = frozenset({"abort", "error"})


@dataclass(frozen=True, slots=True)
class Counts:
    """Good and total requests in a window (floats: interpolation and engine counters)."""

    good: float
    total: float

    @property
    def error_ratio(self) -> float | None:
        """Share of bad requests; None when the window holds no request."""
        if self.total <= 0:
            return None
        return min(1.0, max(0.0, (self.total - self.good) / self.total))


@dataclass(frozen=True, slots=True)
class BoundaryNote:
    """The SLO threshold is not a bucket bound of the engine histogram.

    Attributes:
        family: the canonical histogram (``ttft`` ...).
        threshold_s: the SLO's threshold.
        lower: the nearest bound below it (None: the threshold is below every bound).
        upper: the nearest bound above it (None: above every finite bound).
        interpolated: True when counts were interpolated, False when ``lower`` was used.
    """

    family: str
    threshold_s: float
    lower: float | None
    upper: float | None
    interpolated: bool

    def message(self, slo_name: str) -> str:
        def fmt(b: float | None) -> str:
            return "none" if b is None else f"{b * 1000:g}ms"

        how = (
            "counts are interpolated linearly between them (interpolate: true)"
            if self.interpolated
            else f"requests up to {fmt(self.lower)} count as good (conservative; "
            "set interpolate: true to interpolate)"
        )
        return (
            f"SLO {slo_name!r}: {self.threshold_s * 1000:g}ms is not a bucket bound of the "
            f"engine's {self.family} histogram; nearest bounds {fmt(self.lower)} and "
            f"{fmt(self.upper)}: {how}"
        )


@dataclass(frozen=True, slots=True)
class SliCounts:
    """Counts per requested window, and the bucket note when one applies."""

    counts: tuple[Counts | None, ...]
    note: BoundaryNote | None = None


def selects(selector: Selector, ref: SeriesRef) -> bool:
    """Whether a series is covered by an SLO's selector (a vLLM series names its model in
    ``model_name`` when the target has no ``model`` label)."""
    if selector.target is not None and ref.target != selector.target:
        return False
    if selector.pool is not None and ref.pool != selector.pool:
        return False
    model = ref.model if ref.model is not None else ref.labels.get("model_name")
    return selector.model is None or model == selector.model


def bench_counts(slo: SLO, records: Sequence[RequestRecord]) -> Counts:
    """Exact per-request counts of a benchmark run (failed requests are bad)."""
    att = evaluate(slo, list(records))
    return Counts(float(att.num_good), float(att.num_total))


class SliReader:
    """Reads SLI counts at one evaluation time, sharing series look-ups and increases among
    the SLOs of a round (SLOs with the same selector and windows cost one read)."""

    def __init__(self, store: Store, at_ts: float) -> None:
        self.store = store
        self.at_ts = at_ts
        self._series: dict[str, list[SeriesRef]] = {}
        self._inc: dict[tuple[int, float], float | None] = {}
        self._by_le: dict[tuple[str, Selector], dict[float, list[SeriesRef]]] = {}
        self._newest: dict[int, float | None] = {}

    def series(self, name: str) -> list[SeriesRef]:
        if name not in self._series:
            self._series[name] = find_series(self.store, [name])
        return self._series[name]

    def prefetch(self, needs: Iterable[tuple[SLO, Sequence[float]]]) -> None:
        """Read what many SLOs need in one go (one statement per chunk of series, instead
        of a few per SLO): their series' increases over all their windows."""
        ids: set[int] = set()
        starts: set[float] = set()
        for slo, windows in needs:
            ids.update(r.id for r in self._reads(slo))
            starts.update(self.at_ts - w for w in windows)
        self._fetch(sorted(ids), sorted(starts))
        self._fetch_newest(sorted(ids))

    def _fetch_newest(self, ids: Sequence[int]) -> None:
        todo = [sid for sid in ids if sid not in self._newest]
        if todo:
            found = values_at(self.store, todo, self.at_ts)
            self._newest.update({sid: found[sid][0] if sid in found else None for sid in todo})

    def newest_ts(self, slo: SLO) -> float | None:
        """The newest sample time, at or before the reader's time, of the series the SLO's
        counts come from (None: none has a sample)."""
        ids = [r.id for r in self._reads(slo)]
        self._fetch_newest(ids)
        return max((t for sid in ids if (t := self._newest[sid]) is not None), default=None)

    def _fetch(self, ids: Sequence[int], starts: Sequence[float]) -> None:
        todo = [s for s in starts if any((sid, s) not in self._inc for sid in ids)]
        if ids and todo:
            for sid, values in increases(self.store, ids, self.at_ts, todo).items():
                self._inc.update({(sid, s): v for s, v in zip(todo, values, strict=True)})

    def _increases(
        self, refs: Sequence[SeriesRef], windows: Sequence[float]
    ) -> list[dict[int, float | None]]:
        starts = [self.at_ts - w for w in windows]
        missing = sorted({r.id for r in refs for s in starts if (r.id, s) not in self._inc})
        self._fetch(missing, starts)
        return [{r.id: self._inc[(r.id, s)] for r in refs} for s in starts]

    def _reads(self, slo: SLO) -> list[SeriesRef]:
        """The series the SLO's counts come from."""
        if slo.sli is SLI.ERROR_RATE:
            return self._finished(slo)
        by_le, lower, upper, note = self._buckets(slo)
        return [r for b in wanted_bounds(lower, upper, note) for r in by_le.get(b, [])]

    def _finished(self, slo: SLO) -> list[SeriesRef]:
        return [
            r
            for r in self.series(FINISHED)
            if selects(slo.selector, r) and "finished_reason" in r.labels
        ]

    def counts(self, slo: SLO, windows: Sequence[float]) -> SliCounts:
        """Good / total of ``slo`` over each window ending at the reader's time.

        A window with no matching series, or none with a sample, gives None.
        """
        if slo.sli is SLI.ERROR_RATE:
            return SliCounts(self._availability(slo, windows))
        return self._latency(slo, windows)

    def _availability(self, slo: SLO, windows: Sequence[float]) -> tuple[Counts | None, ...]:
        refs = self._finished(slo)
        out: list[Counts | None] = []
        for inc in self._increases(refs, windows):
            known = [(r, inc[r.id]) for r in refs if inc[r.id] is not None]
            if not known:
                out.append(None)
                continue
            total = sum(v for _, v in known if v is not None)
            bad = sum(
                v for r, v in known if v is not None and r.labels["finished_reason"] in BAD_REASONS
            )
            out.append(Counts(total - bad, total))
        return tuple(out)

    def bounds(self, slo: SLO) -> list[float]:
        """The finite bucket bounds of the SLO's stored histogram (empty for error_rate)."""
        if slo.sli is SLI.ERROR_RATE:
            return []
        return sorted(b for b in self._buckets(slo)[0] if not math.isinf(b))

    def note(self, slo: SLO) -> BoundaryNote | None:
        """What the SLO's threshold is to the stored buckets, when it is not a bound."""
        return None if slo.sli is SLI.ERROR_RATE else self._buckets(slo)[3]

    def _buckets(
        self, slo: SLO
    ) -> tuple[dict[float, list[SeriesRef]], float | None, float | None, BoundaryNote | None]:
        """The SLO's bucket series by bound, the nearest bounds and the note."""
        family = slo.sli.value
        key = (family, slo.selector)
        by_le = self._by_le.get(key)
        if by_le is None:  # SLOs on one family and selector share it
            by_le = self._by_le[key] = {}
            for r in self.series(f"{family}_bucket"):
                le = parse_le(r.labels.get("le"))
                if le is not None and selects(slo.selector, r):
                    by_le.setdefault(le, []).append(r)
        return (by_le, *nearest_bounds(slo, by_le))

    def _latency(self, slo: SLO, windows: Sequence[float]) -> SliCounts:
        by_le, lower, upper, note = self._buckets(slo)
        if math.inf not in by_le:
            return SliCounts(tuple(None for _ in windows))
        wanted = wanted_bounds(lower, upper, note)
        used = [r for b in wanted for r in by_le[b]]
        out = [
            latency_counts(slo, {b: _sum(inc, by_le[b]) for b in wanted}, lower, upper, note)
            for inc in self._increases(used, windows)
        ]
        return SliCounts(tuple(out), note)


def nearest_bounds(
    slo: SLO, bounds: Iterable[float]
) -> tuple[float | None, float | None, BoundaryNote | None]:
    """The bucket bounds at or below and above the SLO's threshold, and the note when the
    threshold is not a bound (both None when the histogram has no finite bound)."""
    finite = sorted(b for b in bounds if not math.isinf(b))
    if not finite:
        return None, None, None
    lower = max((b for b in finite if b <= slo.threshold), default=None)
    upper = min((b for b in finite if b > slo.threshold), default=None)
    note = None
    if lower != slo.threshold:
        interpolated = slo.interpolate and lower is not None and upper is not None
        note = BoundaryNote(slo.sli.value, slo.threshold, lower, upper, interpolated)
    return lower, upper, note


def latency_counts(
    slo: SLO,
    sums: Mapping[float, float | None],
    lower: float | None,
    upper: float | None,
    note: BoundaryNote | None,
) -> Counts | None:
    """Good / total from the increases of the buckets an SLO reads (by bound, ``+Inf`` the
    total): the bound at or below the threshold, or interpolated up to the next one."""
    total = sums.get(math.inf)
    if total is None:
        return None
    good = sums.get(lower) if lower is not None else 0.0
    if note is not None and note.interpolated and lower is not None and upper is not None:
        hi = sums.get(upper)
        if good is not None and hi is not None:
            good += (hi - good) * (slo.threshold - lower) / (upper - lower)
    return Counts(min(good or 0.0, total), total)


def wanted_bounds(
    lower: float | None, upper: float | None, note: BoundaryNote | None
) -> list[float]:
    """The bucket bounds an SLO reads: the bound at or below its threshold, the one above
    when interpolating, and +Inf."""
    interpolated = note is not None and note.interpolated
    return [b for b in (lower, upper if interpolated else None, math.inf) if b is not None]


def _sum(inc: Mapping[int, float | None], refs: Sequence[SeriesRef]) -> float | None:
    known = [inc[r.id] for r in refs if inc[r.id] is not None]
    return sum(v for v in known if v is not None) if known else None
