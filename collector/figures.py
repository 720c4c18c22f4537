"""How a figure is written in a table: short enough never to be cut, never in exponent form.

A table that does not fit the terminal (80 columns when output is piped) has its cells cut
by Rich (``1,661.…``), and ``f"{x:.3g}"`` writes 31,900 as ``3.19e+04``. Figures therefore
keep about three significant digits with the decimals their size needs: ``31,900``,
``166``, ``16.6``, ``1.66``, ``0.166``.
"""

from __future__ import annotations

import math


def figure(x: float | int | None, unit: str = "") -> str:
    """``x`` for a table cell: ``-`` when None, thousands separated above 100, two to three
    significant digits below (an integer stays whole)."""
    if x is None:
        return "-"
    if isinstance(x, int):
        return f"{x:,}{unit}"
    if not math.isfinite(x):
        return f"{x}{unit}"
    size = abs(x)
    if size >= 100 or size == 0:
        text = f"{x:,.0f}"
    elif size >= 10:
        text = f"{x:.1f}"
    elif size >= 1:
        text = f"{x:.2f}"
    else:  # three significant digits; below 1e-4 that is an exponent, rare for a latency
        text = f"{x:.3g}"
    return text + unit
