"""One SLO over its window: the error budget left as a burn-down line and the SLI per step.

Both come from one SLI reader (the store's or a query API's) at the window's end: the reader gives good / total
over windows ending then, so counts over ``[start, t]`` and over each step are differences of
two such windows, read in one batch (a few statements however many points).
"""

from __future__ import annotations

from dataclasses import dataclass

from slotune.collector.alerts import sli_reader
from slotune.collector.alerts.policy import error_budget, has_budget
from slotune.collector.alerts.sli import Counts
from slotune.collector.metrics import PromClient
from slotune.collector.slo import SLO
from slotune.collector.store import Store


@dataclass(frozen=True, slots=True)
class SLOPoint:
    """The SLO at one time of its window.

    Attributes:
        ts: epoch seconds (a step's end).
        budget_left: budget left over ``[window start, ts]``, clamped to [0, 1] as every
            page shows it (None: no request yet, or an objective of 100 %).
        sli: good fraction over the step ending at ``ts`` (None: no request in it).
    """

    ts: float
    budget_left: float | None
    sli: float | None


@dataclass(frozen=True, slots=True)
class SLOHistory:
    slo: SLO
    start_ts: float
    end_ts: float
    step_s: float
    points: tuple[SLOPoint, ...]


def slo_history(
    store: Store, slo: SLO, end_ts: float, *, points: int = 48, metrics: PromClient | None = None
) -> SLOHistory:
    """``slo`` over ``[end_ts - window, end_ts]`` in ``points`` steps, from the store's samples
    or from ``metrics`` (a query API).

    Raises:
        MetricsUnavailable: ``metrics`` cannot be read.
    """
    step = slo.window_s / points
    # windows ending at end_ts: back to each step boundary, the oldest being the whole window
    back = [step * k for k in range(1, points + 1)]
    counts = sli_reader(store, end_ts, metrics).counts(slo, back).counts
    by_back: dict[int, Counts | None] = {0: Counts(0.0, 0.0)}
    by_back.update({k: c for k, c in zip(range(1, points + 1), counts, strict=True)})
    whole = by_back[points]
    budget = error_budget(slo) if has_budget(slo) else None
    out = []
    for k in range(points - 1, -1, -1):  # oldest step first; k steps back from the end
        out.append(
            SLOPoint(
                ts=end_ts - step * k,
                budget_left=_budget_left(_between(whole, by_back[k]), budget),
                sli=_good_fraction(_between(by_back[k + 1], by_back[k])),
            )
        )
    return SLOHistory(slo, end_ts - slo.window_s, end_ts, step, tuple(out))


def _between(longer: Counts | None, shorter: Counts | None) -> Counts | None:
    """Counts over the older part of ``longer`` that ``shorter`` (both ending now) leaves out."""
    if longer is None:
        return None
    if shorter is None:
        return longer
    return Counts(max(longer.good - shorter.good, 0.0), max(longer.total - shorter.total, 0.0))


def _good_fraction(c: Counts | None) -> float | None:
    return None if c is None or c.total <= 0 else min(c.good / c.total, 1.0)


def _budget_left(c: Counts | None, budget: float | None) -> float | None:
    sli = _good_fraction(c)
    if sli is None or budget is None:
        return None
    return min(max(1.0 - (1.0 - sli) / budget, 0.0), 1.0)
