"""Durations as users write them (``500ms``, ``20s``, ``5m``, ``30d``), in seconds.

Every option and file field that takes a duration reads through here, so each accepts the
same units. Dependency-free, so the command line can import it while it builds.
"""

from __future__ import annotations

import math
import re

from slotune.collector.errors import SLOSpecError

UNIT_S = {
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
_DURATION_RE = re.compile(r"^\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>us|µs|ms|s|m|h|d|w)\s*$")


def parse_duration_s(text: str | float | int, *, field_name: str = "duration") -> float:
    """Parse ``500ms``, ``20s``, ``5m``, ``30d`` (or a bare number of seconds) into seconds.

    Raises:
        SLOSpecError: not a duration of 0 or more seconds, naming ``field_name`` and the
            accepted units.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text) if abs(text) < 1e300 else math.inf  # 400-digit ints overflow float
        if not (math.isfinite(value) and value >= 0):
            raise SLOSpecError(f"{field_name}: {text!r} is not a duration of 0 or more seconds")
        return value
    m = _DURATION_RE.match(str(text))
    if not m:
        raise SLOSpecError(
            f"{field_name}: {text!r} is not a duration; write a number with a unit "
            "(us, ms, s, m, h, d, w), e.g. 500ms or 30d"
        )
    return float(m["value"]) * UNIT_S[m["unit"]]
