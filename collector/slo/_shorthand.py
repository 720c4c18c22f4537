"""The command-line shorthand: ``ttft:p99<=500ms``, ``error_rate<=1%``."""

from __future__ import annotations

import re
from collections.abc import Iterable

from slotune.collector.durations import UNIT_S
from slotune.collector.errors import SLOSpecError
from slotune.collector.slo._model import SLI, SLO, Selector, default_name

SHORTHAND_FORMS = "ttft:p99<=500ms, itl:p95<=50ms, tpot:p90<=40ms, e2e:p99<=20s or error_rate<=1%"
_LATENCY_RE = re.compile(
    r"^\s*(?P<sli>ttft|itl|tpot|e2e)\s*:\s*p(?P<pct>\d+(?:\.\d+)?)\s*(?:<=|<|≤)\s*"
    r"(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>us|µs|ms|s|m)\s*$",
    re.IGNORECASE,
)
_ERROR_RE = re.compile(
    r"^\s*error_rate\s*(?:<=|<|≤)\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>%?)\s*$", re.IGNORECASE
)
# Accepted ranges: a latency objective beyond a day, or an error-budget window outside a
# minute .. a year, is a typo, and once stored it would be rendered as text no parser reads.
MAX_LATENCY_THRESHOLD_S = 86400.0
MIN_WINDOW_S = 60.0
MAX_WINDOW_S = 366 * 86400.0


def parse_slo(
    spec: str,
    *,
    name: str | None = None,
    window_s: float = 30 * 86400.0,
    selector: Selector | None = None,
) -> SLO:
    """Parse the command-line shorthand, e.g. ``ttft:p99<=500ms`` or ``error_rate<=1%``.

    Raises:
        SLOSpecError: the text does not match an accepted form.
    """
    if not MIN_WINDOW_S <= window_s <= MAX_WINDOW_S:
        raise SLOSpecError(
            f"SLO {spec!r}: window {window_s:g} s is out of range; use 1m to 366d (e.g. 30d)"
        )
    m = _LATENCY_RE.match(spec)
    if m:
        pct = float(m["pct"])
        if not 0 < pct < 100:
            raise SLOSpecError(
                f"SLO {spec!r}: percentile p{m['pct']} must be between 0 and 100 (e.g. p99)"
            )
        sli = SLI(m["sli"].lower())
        threshold = float(m["value"]) * UNIT_S[m["unit"].lower()]  # the pattern ignores case
        if not 0 < threshold <= MAX_LATENCY_THRESHOLD_S:
            raise SLOSpecError(
                f"SLO {spec!r}: the threshold must be greater than zero and at most 1 day "
                f"({MAX_LATENCY_THRESHOLD_S:g}s)"
            )
        return SLO(
            name=name or default_name(sli, pct),
            sli=sli,
            threshold=threshold,
            percentile=pct,
            objective=pct / 100.0,
            window_s=window_s,
            selector=selector or Selector(),
        )
    m = _ERROR_RE.match(spec)
    if m:
        value = float(m["value"])
        frac = value / 100.0 if m["unit"] == "%" else value
        if not 0 <= frac < 1:
            raise SLOSpecError(f"SLO {spec!r}: the error rate must be below 100 %")
        return SLO(
            name=name or "error-rate",
            sli=SLI.ERROR_RATE,
            threshold=frac,
            percentile=None,
            objective=1.0 - frac,
            window_s=window_s,
            selector=selector or Selector(),
        )
    raise SLOSpecError(f"SLO {spec!r} is not understood; accepted forms: {SHORTHAND_FORMS}")


def parse_slos(specs: Iterable[str]) -> list[SLO]:
    """Parse several shorthands; names must end up unique."""
    slos = [parse_slo(s) for s in specs]
    check_unique(slos, where="--slo")
    return slos


def check_unique(slos: list[SLO], *, where: str) -> None:
    """Refuse two SLOs of one name.

    Raises:
        SLOSpecError: two SLOs share a name, naming ``where`` they came from.
    """
    seen: set[str] = set()
    for s in slos:
        if s.name in seen:
            raise SLOSpecError(f"{where}: two SLOs are named {s.name!r}; give each a unique name")
        seen.add(s.name)
