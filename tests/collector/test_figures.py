"""Figures in tables: never cut at 80 columns, never in exponent form."""

from __future__ import annotations

import io

from _summaries import run_summary
from rich.console import Console

from slotune.collector.bench.render import summary_table
from slotune.collector.figures import figure
from slotune.collector.summary import Distribution


def test_figures_keep_three_digits_without_exponents() -> None:
    cases = [31_900.0, 1_661.23, 166.4, 16.64, 1.664, 0.1664, 0.0012, 0.0, 12_345, None, -5.5]
    assert [figure(x) for x in cases] == [
        "31,900",
        "1,661",
        "166",
        "16.6",
        "1.66",
        "0.166",
        "0.0012",
        "0",
        "12,345",
        "-",
        "-5.50",
    ]


def test_the_run_summary_fits_80_columns_without_cutting_a_number() -> None:
    slow = {"mean": 31_912.4, "p50": 1_661.2, "p90": 23_456.7, "p95": 27_000.1}
    block = {**slow, "p99": 31_900.0, "p99.9": 32_001.9, "std": 1.0, "count": 12_000}
    summary = run_summary(Distribution.from_dict(block), num_requests=12_000)
    out = io.StringIO()
    Console(file=out, width=80).print(summary_table(summary))
    text = out.getvalue()
    assert "…" not in text
    assert all(v in text for v in ("31,912", "1,661", "23,457", "32,002", "12,000"))
