"""Real vLLM refusing or failing, as the user sees it: one clear line from bench, and the
engine's own last log lines when it dies during start-up."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from _tools import SLOTUNE, free_port
from _vllm import start_vllm, vllm_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_bench_naming_a_model_the_server_does_not_serve_is_one_line(real_vllm: str) -> None:
    # fmt: off
    r = subprocess.run(
        [SLOTUNE, "bench", "--url", real_vllm, "--served-model-name", "no-such-model", "--input-len", "16",
         "--output-len", "4", "--rate", "inf", "--num-requests", "3", "--no-store"],
        capture_output=True, text=True, timeout=300,
    )
    # fmt: on
    assert r.returncode == 1
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: every measured request failed (3 http_4xx)"), line


def test_an_engine_dying_during_start_up_fails_with_its_last_log_lines(
    tiny_model: Path, tmp_path: Path
) -> None:
    vllm_python()
    broken = tmp_path / "broken-model"
    shutil.copytree(tiny_model, broken)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps(config | {"architectures": ["NoSuchLM"]}))
    with pytest.raises(pytest.fail.Exception) as failed, start_vllm(broken, port=free_port()):
        pass
    message = str(failed.value)
    assert "vLLM exited with code" in message and "during start-up" in message
    assert "NoSuchLM" in message  # vLLM's own words, from its log
