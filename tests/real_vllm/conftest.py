"""Fixtures for the tests against real vLLM (its CPU build, serving the tiny model).

- ``tiny_model`` (session): the tiny model's directory, built once per run.
- ``real_vllm`` (session): one vLLM server on 127.0.0.1 shared by every test of the run;
  its base URL. It serves the model as ``SERVED_MODEL_NAME`` with vLLM's own defaults
  otherwise, so tests that need other engine flags start their own with ``start_vllm``.
- ``real_vllm_one_seq`` (session): a second server that runs one request at a time
  (``--max-num-seqs 1``): the slow engine of the alert test and the second backend of the
  route test.

Tests here share that server: each one measures over its own window (counter deltas), never
over the server's lifetime. ``SLOTUNE_REAL_VLLM_URL`` points the tests at a server already
running (serving the tiny model as ``SERVED_MODEL_NAME``) instead of starting one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _tools import free_port
from _vllm import build_tiny_model, start_vllm, vllm_python


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def real_vllm(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    running = os.environ.get("SLOTUNE_REAL_VLLM_URL")
    if running:
        yield running.rstrip("/")
        return
    vllm_python()  # skip (fail in CI) before anything starts when vLLM is not installed
    with start_vllm(
        tiny_model, port=free_port(), log_dir=tmp_path_factory.mktemp("vllm-log")
    ) as url:
        yield url


@pytest.fixture(scope="session")
def real_vllm_one_seq(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    vllm_python()
    with start_vllm(
        tiny_model,
        port=free_port(),
        extra_args=("--max-num-seqs", "1"),
        log_dir=tmp_path_factory.mktemp("vllm-one-seq-log"),
    ) as url:
        yield url
