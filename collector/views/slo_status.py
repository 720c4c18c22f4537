"""Each SLO over the fleet, as the dashboard shows it, from the SLO-alert maths.

Attainment, error budget left and burn rates come from :func:`collector.alerts.slo_status`
(the evaluator's own reading of the engine histograms, with each SLO's burn-rate policy), so
the pages and the alerts agree. On top of it a state for people:

- ``breached``: the error budget of the SLO window is spent;
- ``burning``: a burn-rate condition of the SLO's policy holds (its alert fires);
- ``met``: neither; ``no_data``: no request in the SLO window, or no recent sample (the
  agent or its targets stopped reporting).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from slotune.collector.alerts import SliSource, SloStatus, sli_reader, slo_status
from slotune.collector.alerts.slo_rules import load_slos
from slotune.collector.alerts.status import read_ahead
from slotune.collector.errors import MetricsUnavailable
from slotune.collector.metrics import PromClient
from slotune.collector.slo import SLO
from slotune.collector.store import Store


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
        num_events: requests (token gaps for ``itl``) in the SLO window.
        budget_left: fraction of the error budget left (None: no data; negative: overspent).
        burn_rates: burn rate per window of the SLO's policy, keyed by a label like ``1h``,
            shortest first (None: no request in that window).
        pairs: the policy's multi-window conditions as they are paged on.
        firing: severities whose burn-rate condition holds.
        state: an :class:`SLOState`.
        note: how the threshold was read when it is not a bucket bound.
    """

    slo: SLO
    end_ts: float
    attainment: float | None
    num_events: float
    budget_left: float | None
    burn_rates: Mapping[str, float | None]
    firing: tuple[str, ...]
    state: SLOState
    pairs: tuple[BurnPair, ...] = ()
    note: str | None = None

    @property
    def budget_shown(self) -> float | None:
        """The budget left as every page shows it: clamped to [0, 1], since an overspent
        budget is spent (how far over is :attr:`overspent_by`)."""
        return None if self.budget_left is None else min(max(self.budget_left, 0.0), 1.0)

    @property
    def overspent_by(self) -> float | None:
        """How many budgets past the whole one were spent (None: not overspent)."""
        b = self.budget_left
        return -b if b is not None and b < 0 else None


@dataclass(frozen=True, slots=True)
class BurnPair:
    """One fast/slow burn-rate condition: it fires when both windows burn above ``factor``.

    Attributes:
        severity: the alert's severity (``page``, ``ticket``).
        long: the long window's label (``1h``); short: the short one's (``5m``).
        factor: the burn-rate threshold.
        long_rate, short_rate: burn rates over each window (None: no request in it).
        firing: whether both are above the threshold.
    """

    severity: str
    long: str
    short: str
    factor: float
    long_rate: float | None
    short_rate: float | None
    firing: bool

    @property
    def label(self) -> str:
        return f"{self.severity} {self.long}/{self.short} >{self.factor:g}×"


def window_label(seconds: float) -> str:
    """``3600`` -> ``1h``: the largest unit that divides the window."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and (seconds / size).is_integer():
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def slo_statuses(
    store: Store,
    *,
    end_ts: float | None = None,
    slos: Sequence[SLO] | None = None,
    metrics: PromClient | None = None,
    reader: SliSource | None = None,
) -> list[SLOStatus]:
    """Every stored SLO (or the ones given) at ``end_ts`` (now when None), from the store's
    samples or from ``metrics`` (a query API), or through ``reader`` (an SLI reader at
    ``end_ts`` shared with other reads); an SLO whose data cannot be read is no data."""
    end = time.time() if end_ts is None else end_ts
    if reader is None or reader.at_ts != end:
        reader = sli_reader(store, end, metrics)
    chosen = list(load_slos(store).values()) if slos is None else slos
    read_ahead(reader, [(slo, 0.0) for slo in chosen])
    out = []
    for slo in chosen:
        try:
            st = slo_status(store, slo, end, reader=reader)
        except MetricsUnavailable as e:
            out.append(SLOStatus(slo, end, None, 0.0, None, {}, (), SLOState.NO_DATA, note=str(e)))
            continue
        out.append(_shown(slo, end, st))
    return out


def slo_figures(
    store: Store, *, end_ts: float | None = None, metrics: PromClient | None = None
) -> list[dict[str, Any]]:
    """Every stored SLO with its figures (``slo list --json``): the SLO's fields and
    ``status``: attainment, budget left, burn rates over the SLO's windows, or the reason it
    has none (``error``)."""
    end = time.time() if end_ts is None else end_ts
    reader = sli_reader(store, end, metrics)
    slos = list(load_slos(store).values())
    read_ahead(reader, [(slo, 0.0) for slo in slos])
    out = []
    for slo in slos:
        try:
            status: dict[str, Any] = slo_status(store, slo, end, reader=reader).to_dict()
        except MetricsUnavailable as e:
            status = {"no_data": True, "error": str(e)}
        out.append({**slo.to_dict(), "status": status})
    return out


def _shown(slo: SLO, end: float, st: SloStatus) -> SLOStatus:
    # A budget spent over the window stays spent when the newest samples are stale.
    if st.budget_left is not None and st.budget_left <= 0:
        state = SLOState.BREACHED
    elif st.budget_left is None or not st.has_data:
        state = SLOState.NO_DATA
    elif st.firing:
        state = SLOState.BURNING
    else:
        state = SLOState.MET
    return SLOStatus(
        slo=slo,
        end_ts=end,
        attainment=st.attainment,
        num_events=st.num_total or 0.0,
        budget_left=st.budget_left,
        burn_rates={window_label(b.window_s): b.burn_rate for b in st.burns},
        firing=st.firing,
        state=state,
        pairs=tuple(
            BurnPair(
                severity=c.window.severity,
                long=window_label(c.window.long_s),
                short=window_label(c.window.short_s),
                factor=c.window.factor,
                long_rate=c.long.burn_rate,
                short_rate=c.short.burn_rate,
                firing=c.is_firing,
            )
            for c in st.conditions
        ),
        note=st.note,
    )
