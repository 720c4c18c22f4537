"""``slotune bench --requests-out``: the measured requests in the format calibrate reads."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from _tools import SLOTUNE
from bench_fakes import FakeEngine

from slotune.collector.observed import read_observed


def test_requests_out_is_read_back_as_observed_requests(
    fake_engine: Callable[..., FakeEngine], tmp_path: Path
) -> None:
    engine = fake_engine()
    out = tmp_path / "measured.jsonl"
    args = ["bench", "--url", engine.url, "--input-len", "8", "--output-len", "4"]
    args += ["--rate", "100", "--num-requests", "5", "--no-store", "--requests-out", str(out)]
    proc = subprocess.run([SLOTUNE, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    observed = read_observed(out)
    assert len(observed) == 5
    assert all(r.output_tokens == 4 and 0 < r.ttft_ms <= r.e2e_ms for r in observed)
