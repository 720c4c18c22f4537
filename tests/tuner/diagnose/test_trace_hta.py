"""The shared A100 trace against Holistic Trace Analysis 0.5's own numbers (recorded in
tests/data/hta_alexnet_a100_hta050.json with how they were made; HTA is not needed here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotune.tuner.diagnose import diagnose_trace

DATA = Path(__file__).resolve().parents[2] / "data" / "gputraces"
TRACE = DATA / "hta_alexnet_a100_trace.json.gz"
HTA = json.loads((DATA / "hta_alexnet_a100_hta050.json").read_text())
SYNC_TAIL_US = 75_767  # HTA's span runs to the last Stream Sync event (see the notes)


@pytest.fixture(scope="module")
def diagnosis():
    return diagnose_trace(TRACE, memset_separate=True)


def test_memory_time_equals_hta(diagnosis) -> None:
    o = diagnosis.overall
    memory_us = (o.exposed_memcpy_ms + o.overlapped_memcpy_ms + o.exposed_memset_ms) * 1000
    assert memory_us == pytest.approx(HTA["kernel_breakdown_us"]["MEMORY"], abs=0.5)


def test_compute_time_within_a_tenth_of_a_percent_of_hta(diagnosis) -> None:
    compute_us = diagnosis.overall.compute_ms * 1000
    assert compute_us == pytest.approx(HTA["temporal_breakdown_us"]["compute_time"], rel=1e-3)


def test_span_and_idle_match_hta_less_its_sync_tail(diagnosis) -> None:
    o = diagnosis.overall
    hta = HTA["temporal_breakdown_us"]
    assert o.total_ms * 1000 + SYNC_TAIL_US == pytest.approx(hta["kernel_time"], abs=0.5)
    assert o.idle_ms * 1000 + SYNC_TAIL_US == pytest.approx(hta["idle_time"], rel=1e-4)


def test_launch_delay_and_counts(diagnosis) -> None:
    launch = diagnosis.launch
    assert launch.launch_delay.max_us == HTA["launch_stats"]["launch_delay_max_us"]
    assert launch.num_kernels == 79
    assert launch.num_kernel_launches == 79
    assert diagnosis.overall.memcpy["HtoD"].num_bytes > 0
