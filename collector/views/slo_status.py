"""Each SLO over the fleet: attainment, error budget left and burn rates, from stored series.

A request is good when its value is within the SLO's threshold, so the good fraction over a
window is the increase of the histogram's bucket at the threshold over the increase of its
``+Inf`` bucket, summed over the targets the selector matches (a series that starts inside
the window counts from zero, as an engine's counters do when it starts) (linear inside the bucket
that holds the threshold, as ``histogram_quantile`` interpolates). ``itl`` histograms count
tokens, so an ITL SLO is measured per token here. ``error_rate`` counts finished requests
whose ``finished_reason`` is ``abort`` as errors.

- budget left = 1 - (1 - attainment) / (1 - objective) over the SLO window (1: untouched,
  0 or less: spent);
- burn rate over a window w = (1 - attainment over w) / (1 - objective): 1 spends the budget
  exactly by the end of the SLO window;
- state: ``breached`` when the budget is spent, ``burning`` when the 1 h or 6 h burn rate is
  above 1, ``met`` otherwise, ``no_data`` when the window holds no request.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from slotune.collector.slo import SLI, SLO
from slotune.collector.store import (
    SeriesPoints,
    Store,
    TargetInfo,
    list_slos,
    list_targets,
    series_at,
)

# Sloth / Pyrra's windows for a 30-day SLO.
BURN_WINDOWS: dict[str, float] = {"1h": 3600.0, "6h": 6 * 3600.0, "1d": 86400.0, "3d": 3 * 86400.0}


class SLOState(StrEnum):
    MET = "met"
    BURNING = "burning"
    BREACHED = "breached"
    NO_DATA = "no_data"


@dataclass(frozen=True, slots=True)
class SLOStatus:
    """One SLO at ``end_ts``.

    Attributes:
        slo: the SLO.
        end_ts: evaluation time, epoch seconds.
        attainment: good fraction over the SLO window (None: no request in it).
        num_events: requests (tokens for ``itl``) in the SLO window.
        budget_left: fraction of the error budget left (None: no data).
        burn_rates: burn rate per window of :data:`BURN_WINDOWS` (None: no data).
        state: an :class:`SLOState`.
        targets: the targets the selector matched.
    """

    slo: SLO
    end_ts: float
    attainment: float | None
    num_events: float
    budget_left: float | None
    burn_rates: Mapping[str, float | None]
    state: SLOState
    targets: tuple[str, ...]


def matches(slo: SLO, t: TargetInfo) -> bool:
    s = slo.selector
    return (
        (s.model is None or s.model == t.model)
        and (s.pool is None or s.pool == t.pool)
        and (s.target is None or s.target == t.name)
    )


def fraction_within(buckets: Sequence[tuple[float, float]], threshold: float) -> float | None:
    """Share of observations at or below ``threshold`` from (upper bound, cumulative count)
    buckets sorted by bound and ending with +Inf; None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if threshold < bound:
            if bound == float("inf"):
                return below / total
            share = (threshold - lower) / (bound - lower) if bound > lower else 1.0
            return (below + (count - below) * max(share, 0.0)) / total
        lower, below = bound, count
    return min(below / total, 1.0)


def _good_total(
    slo: SLO, points: Sequence[SeriesPoints], a: int, b: int
) -> tuple[float, float] | None:
    def inc(p: SeriesPoints) -> float | None:
        va, vb = p.values[a], p.values[b]
        if vb is None:
            return None
        # A series born inside the window (an engine that started) counts from zero.
        return vb - (va or 0.0) + sum(p.resets[a + 1 : b + 1])

    if slo.sli is SLI.ERROR_RATE:
        total = bad = 0.0
        for p in points:
            if p.name == "requests_finished" and (v := inc(p)) is not None:
                total += v
                bad += v if p.labels.get("finished_reason") == "abort" else 0.0
        return (total - bad, total) if total > 0 else None
    per_le: dict[float, float] = defaultdict(float)
    for p in points:
        if p.name == f"{slo.sli.value}_bucket" and (v := inc(p)) is not None:
            try:
                per_le[float(p.labels.get("le", "nan"))] += v
            except ValueError:
                continue
    buckets = sorted(per_le.items())
    share = fraction_within(buckets, slo.threshold)
    return None if share is None else (share * buckets[-1][1], buckets[-1][1])


def _burn(good_total: tuple[float, float] | None, objective: float) -> float | None:
    if good_total is None:
        return None
    good, total = good_total
    allowed = 1.0 - objective
    bad = 1.0 - good / total
    return bad / allowed if allowed > 0 else (0.0 if bad <= 0 else float("inf"))


def slo_statuses(
    store: Store, *, end_ts: float | None = None, slos: Sequence[SLO] | None = None
) -> list[SLOStatus]:
    """Every stored SLO (or the ones given) at ``end_ts`` (now when None)."""
    end = time.time() if end_ts is None else end_ts
    targets = list_targets(store)
    out = []
    for slo in list_slos(store) if slos is None else slos:
        matched = [t.name for t in targets if matches(slo, t)]
        starts = {end - slo.window_s, *(end - w for w in BURN_WINDOWS.values())}
        grid = [*sorted(starts), end]
        name = "requests_finished" if slo.sli is SLI.ERROR_RATE else f"{slo.sli.value}_bucket"
        points = series_at(store, [name], grid, matched) if matched else []
        last = len(grid) - 1
        whole = _good_total(slo, points, grid.index(end - slo.window_s), last)
        burns = {
            label: _burn(_good_total(slo, points, grid.index(end - w), last), slo.objective)
            for label, w in BURN_WINDOWS.items()
        }
        burn_all = _burn(whole, slo.objective)
        out.append(
            SLOStatus(
                slo=slo,
                end_ts=end,
                attainment=None if whole is None else whole[0] / whole[1],
                num_events=0.0 if whole is None else whole[1],
                budget_left=None if burn_all is None else 1.0 - burn_all,
                burn_rates=burns,
                state=_state(burn_all, burns),
                targets=tuple(matched),
            )
        )
    return out


def _state(burn_all: float | None, burns: Mapping[str, float | None]) -> SLOState:
    if burn_all is None:
        return SLOState.NO_DATA
    if burn_all > 1.0:
        return SLOState.BREACHED
    if any((burns.get(w) or 0.0) > 1.0 for w in ("1h", "6h")):
        return SLOState.BURNING
    return SLOState.MET
