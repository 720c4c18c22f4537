"""Helpers shared by tests: free ports and external tools that may be missing."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

SLOTUNE = str(Path(sys.executable).parent / "slotune")  # the venv's console script


def in_ci() -> bool:
    """Whether the run is CI (``CI=true``), where a missing tool is a failure, not a skip."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing_tool(what: str, debian_package: str) -> None:
    """Skip the test for a missing external tool (fail instead in CI)."""
    reason = f"needs {what} (Debian package {debian_package!r}; scripts/test.sh installs it)"
    if in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def require_binary(name: str, debian_package: str, search: tuple[str, ...] = ()) -> str:
    """Path of executable ``name`` on PATH or in the ``search`` globs; skips when missing.

    Args:
        name: executable name, e.g. ``promtool``.
        debian_package: the package that provides it, named in the skip reason.
        search: extra glob patterns of directories to look in (newest sorted last).
    """
    found = shutil.which(name)
    if found:
        return found
    for pattern in search:
        for directory in sorted(glob.glob(pattern), reverse=True):
            candidate = os.path.join(directory, name)
            if os.access(candidate, os.X_OK):
                return candidate
    missing_tool(name, debian_package)
    raise AssertionError("unreachable")  # pytest.skip / pytest.fail raise


@contextlib.contextmanager
def running_emulator(
    timings: Path, *, speedup: float, extra_args: Sequence[str] = ()
) -> Iterator[str]:
    """``slotune emulate`` (llama-3.1-8b on h100-sxm) as a subprocess; yields its base URL.

    ``extra_args`` are more ``slotune emulate`` flags (``--vllm-version 0.32.0``).

    It is started as a process, not imported, so tests under collector/ keep the layer rule.
    """
    port = free_port()
    proc = subprocess.Popen(
        [
            SLOTUNE,
            "emulate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--port",
            str(port),
            "--speedup",
            str(speedup),
            "--timings-file",
            str(timings),
            *extra_args,
        ],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    for line in proc.stdout:
        if "Starting slotune emulated" in line:
            break
    else:
        raise AssertionError(f"emulator did not start: {proc.stderr.read()}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.communicate(timeout=15)
