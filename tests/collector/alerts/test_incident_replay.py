"""Incident replay end to end: a TTFT regression under load fires the page alert and resolves.

Two emulated engines serve one fleet; the agent scrapes both every 0.5 s into the store.
`slotune bench` loads the fast engine, then (the regression) the slow one, then the fast one
again. The SLO ``ttft:p99<=40ms`` over a 3-hour window gets the SRE workbook's windows
scaled by 3h / 30d (page: 15 s & 1.25 s over 14.4x, 90 s & 7.5 s over 6x). The evaluator is
replayed over the incident every half second.

When it should fire and resolve is worked out from what was recorded, never from the wall
clock: the agent's stored scrapes of the engines' TTFT histograms. At each evaluation time a
plain re-computation over those samples (the last value at or before each window edge, per
engine, summed) gives each window's error ratio and the page verdict; the evaluator, which
reads the same samples through the store's batched window queries, must give the same verdict
at every evaluation, page no earlier than the first slow request was scraped, and resolve.
A loaded machine delays scrapes and slows the engines (the "fast" engine itself can fall
behind and page again); that moves the verdicts, never fails the test.
"""

from __future__ import annotations

import bisect
import json
import subprocess
import time
from pathlib import Path

import pytest
from _tools import SLOTUNE, running_emulator
from sqlalchemy import text

from slotune.collector.alerts.evaluator import evaluate_all
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.slo import parse_slo_yaml
from slotune.collector.store import (
    AlertState,
    Store,
    alert_history,
    find_series,
    open_store,
    upgrade,
)

SCRAPE_S = 0.5
PAGE = ((15.0, 1.25, 14.4), (90.0, 7.5, 6.0))  # (long, short, factor) scaled by 3h / 30d
BUDGET = 0.01
THRESHOLD_S = 0.040
SLOS = "slos:\n  - name: fleet-ttft\n    spec: ttft:p99<=40ms\n    window: 3h\n"


def bench(url: str, seconds: float, db: str) -> None:
    subprocess.run(
        [
            SLOTUNE,
            "--db",
            db,
            "bench",
            "--url",
            url,
            "--rate",
            "8",
            "--duration",
            str(seconds),
            "--input-len",
            "2048",
            "--output-len",
            "8",
            "--no-store",
            "--seed",
            "1",
        ],
        check=True,
        capture_output=True,
        timeout=seconds + 60,
    )


@pytest.mark.slow
def test_ttft_regression_pages_and_resolves_when_the_request_records_say(
    sqlite_url: str, tmp_path: Path
) -> None:
    upgrade(sqlite_url)
    with (
        running_emulator(tmp_path / "fast.jsonl", speedup=100) as fast,
        running_emulator(tmp_path / "slow.jsonl", speedup=1) as slow,
    ):
        agent = subprocess.Popen(
            [
                SLOTUNE,
                "--db",
                sqlite_url,
                "agent",
                "--scrape",
                f"vllm={fast}",
                "--scrape",
                f"vllm={slow}",
                "--interval",
                f"{SCRAPE_S}s",
                "--heartbeat",
                "0s",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            time.sleep(2 * SCRAPE_S)
            bench(fast, 3, sqlite_url)
            bench(slow, 4, sqlite_url)
            bench(fast, 11, sqlite_url)
            time.sleep(3 * SCRAPE_S)
            end = time.time()
        finally:
            agent.terminate()
            _, err = agent.communicate(timeout=30)
    assert agent.returncode in (0, -15), err
    # the regression, as the slow engine saw it: its first arrival
    slow_requests = [
        json.loads(line) for line in (tmp_path / "slow.jsonl").read_text().splitlines()
    ]
    regression_at = min(r["arrival_s"] for r in slow_requests)

    with open_store(sqlite_url) as store:
        apply_slos(store, parse_slo_yaml(SLOS), min_window_s=SCRAPE_S)
        grid = [
            regression_at - 5.0 + i * SCRAPE_S
            for i in range(int((end - regression_at + 5.0) / SCRAPE_S) + 1)
        ]
        for t in grid:
            evaluate_all(store, t, record=True, min_window_s=SCRAPE_S)
        events = [(h.event.state, h.event.ts) for h in alert_history(store, rule="fleet-ttft:page")]
    oracle = Oracle(sqlite_url)
    verdicts = [oracle.pages(t) for t in grid]
    firing_at = {ts for state, ts in events if state is AlertState.FIRING}
    resolved_at = {ts for state, ts in events if state is AlertState.RESOLVED}
    state = False
    for t, verdict in zip(grid, verdicts, strict=True):
        state = (state or t in firing_at) and t not in resolved_at
        assert state == verdict, (t - regression_at, events)
    assert oracle.first_slow_request_scraped() <= min(firing_at)
    assert resolved_at and (events[-1][0] is AlertState.RESOLVED or verdicts[-1])


Points = list[tuple[float, float]]  # (ts, cumulative count)


class Oracle:
    """The page condition recomputed from the stored histogram samples of each engine."""

    def __init__(self, url: str) -> None:
        self.series: dict[str, dict[str, Points]] = {}  # target -> le -> points
        with open_store(url) as store:
            for ref in find_series(store, ["ttft_bucket"]):
                le = ref.labels.get("le")
                if le in ("0.04", "+Inf"):
                    self.series.setdefault(ref.target, {})[le] = points(store, ref.id)

    @staticmethod
    def _increase(pts: Points, t: float, window_s: float) -> float:
        times = [ts for ts, _ in pts]
        end = bisect.bisect_right(times, t) - 1
        if end < 0:
            return 0.0
        start = bisect.bisect_right(times, t - window_s) - 1
        return pts[end][1] - pts[max(start, 0)][1]  # born inside: from its first sample

    def _burn(self, t: float, window_s: float) -> float:
        good = sum(self._increase(s["0.04"], t, window_s) for s in self.series.values())
        total = sum(self._increase(s["+Inf"], t, window_s) for s in self.series.values())
        return (1 - good / total) / BUDGET if total else 0.0

    def pages(self, t: float) -> bool:
        return any(
            self._burn(t, long_s) > f and self._burn(t, short_s) > f for long_s, short_s, f in PAGE
        )

    def first_slow_request_scraped(self) -> float:
        """When a request over the threshold was first scraped, on any engine."""
        grew = []
        for s in self.series.values():
            bad = [(ts, n - g) for (ts, g), (_, n) in zip(s["0.04"], s["+Inf"], strict=True)]
            grew += [ts for (ts, b), (_, prev) in zip(bad[1:], bad, strict=False) if b > prev]
        return min(grew)


def points(store: Store, series_id: int) -> Points:
    with store.connection() as conn:
        rows = conn.execute(
            text("SELECT ts, value FROM sample WHERE series_id = :s ORDER BY ts"), {"s": series_id}
        )
        return [(float(ts), float(v)) for ts, v in rows]
