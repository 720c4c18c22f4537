"""Error budgets, burn rates and the multi-window multi-burn-rate (MWMB) policy.

For an SLO with objective ``o`` the error budget is ``1 - o`` of the requests in its window.
The burn rate over a window ``w`` is the error ratio in ``w`` divided by the budget: 1 spends
the budget exactly over the SLO window, 14.4 spends 2 % of a 30-day budget in one hour.

The default policy is the SRE workbook's (chapter 5, "Alerting on SLOs") for a 30-day SLO —
page when 1h and 5m both burn faster than 14.4, or 6h and 30m faster than 6; ticket when 1d
and 2h burn faster than 3, or 3d and 6h faster than 1 — with every window scaled by
``slo window / 30 days``, so each condition still means the same share of budget spent.
"""

from __future__ import annotations

from slotune.collector.errors import SLOSpecError
from slotune.collector.slo import SLO, BurnWindow

_H = 3600.0
REFERENCE_PERIOD_S = 30 * 86400.0
SRE_WORKBOOK: tuple[BurnWindow, ...] = (
    BurnWindow("page", 1 * _H, 5 * 60.0, 14.4),
    BurnWindow("page", 6 * _H, 30 * 60.0, 6.0),
    BurnWindow("ticket", 24 * _H, 2 * _H, 3.0),
    BurnWindow("ticket", 72 * _H, 6 * _H, 1.0),
)


def has_budget(slo: SLO) -> bool:
    """Whether the objective leaves an error budget (it does not at 100 %)."""
    return 1.0 - slo.objective > 1e-12


def error_budget(slo: SLO) -> float:
    """The share of requests allowed to be bad (``1 - objective``).

    Raises:
        SLOSpecError: the objective is 100 %, which leaves no budget to burn.
    """
    budget = 1.0 - slo.objective
    if not has_budget(slo):
        raise SLOSpecError(
            f"SLO {slo.name!r}: an objective of 100 % leaves no error budget; "
            "lower it (e.g. 99.9%) or set alerting.enabled: false"
        )
    return budget


def burn_rate(error_ratio: float, slo: SLO) -> float:
    """How fast an error ratio spends the SLO's budget (1 = exactly over its window)."""
    return error_ratio / error_budget(slo)


def burn_windows(slo: SLO, *, min_window_s: float = 0.0) -> tuple[BurnWindow, ...]:
    """The SLO's burn-rate conditions: its ``alerting.windows`` or the scaled defaults.

    Args:
        slo: the SLO.
        min_window_s: the shortest window that makes sense (the scrape interval): a window
            shorter than it would hold at most one sample.

    Raises:
        SLOSpecError: a window is shorter than ``min_window_s`` or longer than the SLO window.
    """
    windows = slo.alerting.windows or tuple(
        BurnWindow(
            w.severity,
            w.long_s * slo.window_s / REFERENCE_PERIOD_S,
            w.short_s * slo.window_s / REFERENCE_PERIOD_S,
            w.factor,
        )
        for w in SRE_WORKBOOK
    )
    for w in windows:
        if w.short_s < min_window_s:
            raise SLOSpecError(
                f"SLO {slo.name!r}: burn-rate window {w.short_s:g}s ({w.severity}) is shorter "
                f"than the scrape interval {min_window_s:g}s; lengthen the SLO window or give "
                "alerting.windows explicitly"
            )
        if w.long_s > slo.window_s:
            raise SLOSpecError(
                f"SLO {slo.name!r}: burn-rate window {w.long_s:g}s ({w.severity}) is longer "
                f"than the SLO window {slo.window_s:g}s; shorten it in alerting.windows"
            )
    return windows
