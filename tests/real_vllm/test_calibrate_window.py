"""``slotune sim calibrate --target --window`` on a store the agent filled from real vLLM under
load: the window it fits is vLLM's own histograms over that window, and the overlay is written
exactly when the fit beats the uncalibrated model on the draw it did not see."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
import yaml
from _tools import SLOTUNE
from real_vllm_helpers import TARGET, delta, measured_window

from slotune.collector.bench import ArrivalSpec, BenchConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NUM_REQUESTS = 60  # the window fit needs 50 finished requests


def test_calibrate_fits_the_window_vllm_served(real_vllm: str, tmp_path: Path) -> None:
    w = measured_window(
        real_vllm,
        tmp_path,
        BenchConfig(
            url=real_vllm,
            arrival=ArrivalSpec.from_rate(10.0),
            input_len="96",
            output_len="16",
            num_requests=NUM_REQUESTS,
            seed=5,
            timeout_s=300,
        ),
    )
    out = tmp_path / "overlay.yaml"
    # fmt: off
    run = subprocess.run(
        [SLOTUNE, "--db", w.db, "sim", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
         "calibrate", "--target", TARGET, "--window", f"{math.ceil(w.end - w.start)}s",
         "--end", str(w.end), "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=600,
    )
    # fmt: on
    assert run.returncode in (0, 3), run.stdout + run.stderr
    data = json.loads(run.stdout)
    window = data["window"]
    served = delta(w.after, w.before, "vllm:request_prompt_tokens_count")
    assert window["num_requests"] == served == NUM_REQUESTS
    ttft_count = delta(w.after, w.before, "vllm:time_to_first_token_seconds_count")
    ttft_sum = delta(w.after, w.before, "vllm:time_to_first_token_seconds_sum")
    assert window["mean_ttft_s"] == pytest.approx(ttft_sum / ttft_count)
    prompt_sum = delta(w.after, w.before, "vllm:request_prompt_tokens_sum")
    assert window["mean_prompt_tokens"] == pytest.approx(prompt_sum / served)
    # Written exactly when the fit beats the prior on the unseen draw.
    assert data["beats_prior"] is (run.returncode == 0)
    assert out.is_file() is data["beats_prior"]
    if out.is_file():
        calibrated = yaml.safe_load(out.read_text("utf-8"))["gpus"][0]["calibrated"]
        assert calibrated["by"] == "slotune sim calibrate --target"
