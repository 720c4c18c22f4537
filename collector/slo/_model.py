"""The SLO record: which indicator, its threshold and objective, and how it alerts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from slotune.collector.records import RequestRecord

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,127}$")


class SLI(StrEnum):
    TTFT = "ttft"
    ITL = "itl"
    TPOT = "tpot"
    E2E = "e2e"
    ERROR_RATE = "error_rate"

    @property
    def is_per_request(self) -> bool:
        """Whether one request is good or bad on its own (``ttft``, ``tpot``, ``e2e``)."""
        return self in (SLI.TTFT, SLI.TPOT, SLI.E2E)

    @property
    def event(self) -> str:
        """What the SLI counts: ``token`` (gaps) for ``itl``, else ``request``."""
        return "token" if self is SLI.ITL else "request"


@dataclass(frozen=True, slots=True)
class Selector:
    """Which traffic an SLO covers; empty fields match everything."""

    model: str | None = None
    pool: str | None = None
    target: str | None = None

    def as_dict(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (("model", self.model), ("pool", self.pool), ("target", self.target))
            if v is not None
        }


@dataclass(frozen=True, slots=True)
class BurnWindow:
    """One multi-window burn-rate condition: alert when the burn rate over both the long and
    the short window exceeds ``factor`` (the short window makes the alert reset quickly)."""

    severity: str
    long_s: float
    short_s: float
    factor: float


@dataclass(frozen=True, slots=True)
class Alerting:
    """How an SLO alerts (the ``alerting:`` block of the SLO file).

    Attributes:
        enabled: False turns the SLO's burn-rate alerts off.
        windows: the burn-rate conditions; empty means the SRE workbook's defaults scaled to
            the SLO window (see ``collector.alerts.policy``).
        labels: labels added to every alert of the SLO.
    """

    enabled: bool = True
    windows: tuple[BurnWindow, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SLO:
    """One objective.

    Attributes:
        name: unique name (lowercase, digits, ``-_.``).
        sli: which indicator.
        threshold: seconds for latency SLIs; a fraction (0.01 = 1 %) for ``error_rate``.
        percentile: the pQ of the shorthand (99.0 for p99); None for ``error_rate``.
        objective: fraction of good requests required (defaults to percentile / 100;
            for ``error_rate``, 1 - threshold).
        window_s: the SLO window in seconds (error budget period).
        selector: label selector.
        description: free text.
        interpolate: with engine histograms whose bucket bounds miss the threshold, count
            requests between the two nearest bounds linearly instead of using the bound at
            or below the threshold (conservative).
        alerting: how the SLO alerts.
    """

    name: str
    sli: SLI
    threshold: float
    percentile: float | None = None
    objective: float = 0.99
    window_s: float = 30 * 86400.0
    selector: Selector = field(default_factory=Selector)
    description: str = ""
    interpolate: bool = False
    alerting: Alerting = field(default_factory=Alerting)

    @property
    def spec(self) -> str:
        """The shorthand form of this SLO."""
        if self.sli is SLI.ERROR_RATE:
            return f"error_rate<={_fmt_num(self.threshold * 100)}%"
        return f"{self.sli.value}:p{_fmt_num(self.percentile or 0)}<={_fmt_latency(self.threshold)}"

    def value_of(self, record: RequestRecord) -> float | None:
        """The request's own SLI value in seconds (None when not defined for it, and for
        ``itl`` and ``error_rate``, which no request has on its own)."""
        if self.sli is SLI.TTFT:
            return record.ttft_s
        if self.sli is SLI.E2E:
            return record.e2e_s
        if self.sli is SLI.TPOT:
            return record.tpot_s
        return None

    def is_good(self, record: RequestRecord) -> bool:
        """Whether one request meets this SLO, as goodput counts it. Failed requests are
        never good; a completed one always is for ``itl`` (pooled over the run's token gaps,
        see :func:`~slotune.collector.slo.evaluate`) and ``error_rate``."""
        if not record.is_ok:
            return False
        if not self.sli.is_per_request:
            return True
        value = self.value_of(record)
        # A request with no defined value (e.g. TPOT of a one-token output) cannot break it.
        return value is None or value <= self.threshold

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec,
            "sli": self.sli.value,
            "percentile": self.percentile,
            "threshold": self.threshold,
            "objective": self.objective,
            "window_s": self.window_s,
            "selector": self.selector.as_dict(),
            "description": self.description,
        }


def _fmt_num(x: float) -> str:
    return f"{x:g}"


def _fmt_latency(seconds: float) -> str:
    if seconds >= 1 and float(seconds).is_integer():
        return f"{seconds:g}s"
    return f"{seconds * 1000:g}ms"


def default_name(sli: SLI, percentile: float | None) -> str:
    return sli.value if percentile is None else f"{sli.value}-p{_fmt_num(percentile)}"
