"""A short workload for tuning against real vLLM: prompts and answers the tiny model serves in
well under a second each on two cores, so a trial is a few seconds of requests."""

from __future__ import annotations

from pathlib import Path

import pytest
from _vllm import vllm_env

from slotune.collector.workload import retime
from slotune.collector.workload.synthetic import parse_length_spec, synthetic_trace
from slotune.tuner.tune.backends.launch import write_trace

NUM_REQUESTS = 12
# Low enough for a loaded 2-core machine to keep up; a run that does not is run again on more
# requests (tuner.tune.steady), which only lengthens the test.
RATE = 1.0
SLOS = ("ttft:p99<=2s",)


def write_short_trace(path: Path, n: int = 64, seed: int = 1) -> Path:
    """``n`` requests of 64-192 prompt and 16-48 output tokens at 2 req/s (JSONL)."""
    lengths = synthetic_trace(
        parse_length_spec("uniform:64,192"), parse_length_spec("uniform:16,48"), n, seed=seed
    )
    write_trace(retime(lengths, rate=2.0, seed=seed), path)
    return path


def offline_engine_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment launched engines inherit: offline, 1 GiB of KV cache, no usage stats."""
    for key, value in vllm_env({}).items():
        if key.startswith(("HF_", "TRANSFORMERS_", "VLLM_", "DO_NOT_TRACK")):
            monkeypatch.setenv(key, value)
