"""SLO alerts on a real TTFT regression: the same burst of requests on the shared server and on
one started with ``--max-num-seqs 1``. The second runs the burst one request at a time, so
the k-th request waits for k-1 whole decodes before its first token, while the shared server
batches the burst and answers it at once: most of the burst's TTFTs on the second are several
times the slowest on the first, whatever the machine's load.

How long a TTFT is depends on the machine, so the threshold is set from the bursts themselves:
the first bucket bound of vLLM's TTFT histogram at least 1.5 times the shared server's slowest
TTFT, below the regressed server's median. SLO ``ttft:p99<=<that>`` over 6 h, one per engine:
the page rule's windows are the SRE workbook's scaled by 6 h / 30 d (30 s and 2.5 s at 14.4
times the 1 % budget), so a burst of a few seconds can page. The SLOs are stored after the
bursts (the evaluation reads the recorded scrapes) and evaluated as ``slotune alerts run`` does,
every half second over them.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from real_vllm_helpers import SCRAPE_INTERVAL_S, agent_running

from slotune.collector.agent.base import SourceKind
from slotune.collector.agent.targets import make_target
from slotune.collector.alerts.evaluator import evaluate_all
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.bench import ArrivalSpec, BenchConfig, run_benchmark
from slotune.collector.slo import parse_slo_yaml
from slotune.collector.store import open_store, upgrade

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

BURST = 12
# vLLM 0.32's bucket bounds of vllm:time_to_first_token_seconds (tests/data/vllm).
TTFT_BOUNDS_S = (0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0)


def slos_at(threshold_s: float) -> str:
    return "slos:\n" + "".join(
        f"  - name: ttft-{t}\n    spec: ttft:p99<={threshold_s}s\n    window: 6h\n"
        f"    selector: {{target: {t}}}\n"
        for t in ("shared", "one-seq")
    )


def burst(url: str) -> list[float]:
    """The burst's TTFTs in seconds, as the client saw them (at least vLLM's own)."""
    result = run_benchmark(
        BenchConfig(
            url=url,
            arrival=ArrivalSpec.from_rate(float("inf")),
            input_len="64",
            output_len="64",
            num_requests=BURST,
            seed=2,
            timeout_s=300,
        )
    )
    assert result.summary.num_errors == 0
    return sorted(r.first_token_s - r.send_s for r in result.records if r.first_token_s)


def test_a_ttft_regression_pages_only_for_the_engine_that_regressed(
    real_vllm: str, real_vllm_one_seq: str, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'alerts.db'}"
    upgrade(db)
    targets = [
        make_target(SourceKind.VLLM, url, name=name, interval_s=SCRAPE_INTERVAL_S, node="n1")
        for name, url in (("shared", real_vllm), ("one-seq", real_vllm_one_seq))
    ]
    with agent_running(targets, db, tmp_path / "spool"):
        start = time.time()
        shared = burst(real_vllm)
        regressed = burst(real_vllm_one_seq)
    end = time.time()
    threshold_s = next(b for b in TTFT_BOUNDS_S if b >= 1.5 * shared[-1])
    # The regression under test: one request at a time puts most of the burst past it.
    assert regressed[len(regressed) // 2] > threshold_s, (shared, regressed)

    firing: dict[str, int] = {"ttft-shared:page": 0, "ttft-one-seq:page": 0}
    with open_store(db) as store:
        apply_slos(store, parse_slo_yaml(slos_at(threshold_s)), min_window_s=SCRAPE_INTERVAL_S)
        at = start
        while at <= end:
            for status in evaluate_all(store, at, min_window_s=SCRAPE_INTERVAL_S):
                if status.rule in firing and status.state == "firing":
                    firing[status.rule] += 1
            at += SCRAPE_INTERVAL_S
    assert firing["ttft-one-seq:page"] > 0, (firing, threshold_s)
    assert firing["ttft-shared:page"] == 0, (firing, threshold_s)
