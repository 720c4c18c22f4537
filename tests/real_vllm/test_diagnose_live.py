"""``slotune diagnose live`` on a store the agent filled from real vLLM under load: the phase
times and batch size it reports are vLLM's own histograms over the window."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from _tools import SLOTUNE
from real_vllm_helpers import TARGET, delta, measured_window

from slotune.collector.bench import ArrivalSpec, BenchConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_diagnose_live_reads_vllms_phase_times(real_vllm: str, tmp_path: Path) -> None:
    w = measured_window(
        real_vllm,
        tmp_path,
        BenchConfig(
            url=real_vllm,
            arrival=ArrivalSpec.from_rate(10.0),
            input_len="128",
            output_len="24",
            num_requests=16,
            seed=4,
            timeout_s=300,
        ),
    )
    # fmt: off
    out = subprocess.run(
        [SLOTUNE, "--db", w.db, "diagnose", "live", "--target", TARGET,
         "--window", f"{math.ceil(w.end - w.start)}s", "--end", str(w.end), "--no-store",
         "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    # fmt: on
    (engine,) = json.loads(out.stdout)["targets"]
    figures = engine["figures"]
    for key, family in (
        ("queue_s", "vllm:request_queue_time_seconds"),
        ("prefill_s", "vllm:request_prefill_time_seconds"),
        ("decode_s", "vllm:request_decode_time_seconds"),
        ("iteration_tokens", "vllm:iteration_tokens_total"),
    ):
        count = delta(w.after, w.before, f"{family}_count")
        assert count > 0, family
        assert figures[key] == pytest.approx(delta(w.after, w.before, f"{family}_sum") / count), key
    assert 0.0 <= figures["kv_usage"] <= 1.0
    assert engine["findings"], "diagnose live names at least one finding (or 'healthy')"
