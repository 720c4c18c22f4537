"""A short workload for tuning against real vLLM: prompts and answers the tiny model serves in
well under a second each on two cores, so a trial is a few seconds of requests."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from _vllm import vllm_env

NUM_REQUESTS = 16
RATE = 4.0
SLOS = ("ttft:p99<=2s",)


def write_short_trace(path: Path, n: int = 64, seed: int = 1) -> Path:
    """``n`` requests of 64-192 prompt and 16-48 output tokens, 0.5 s apart (JSONL)."""
    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(n):
            row = {
                "timestamp": i * 0.5,
                "input_tokens": rng.randint(64, 192),
                "output_tokens": rng.randint(16, 48),
            }
            f.write(json.dumps(row) + "\n")
    return path


def offline_engine_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment launched engines inherit: offline, 1 GiB of KV cache, no usage stats."""
    for key, value in vllm_env({}).items():
        if key.startswith(("HF_", "TRANSFORMERS_", "VLLM_", "DO_NOT_TRACK")):
            monkeypatch.setenv(key, value)
