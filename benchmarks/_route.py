"""Processes the ``slotune route`` benchmarks run: emulated engines, the proxy, ``slotune bench``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from _procs import pin

from slotune.tuner.tune.backends.launch import free_port

SLOTUNE = str(Path(sys.executable).parent / "slotune")
MODEL = "llama-3.1-8b"


_START_LIMIT_S = 120.0


def _start(argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    # output to a file, not a pipe: nobody reads a pipe during the run, and a full one blocks
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def _wait_for(proc: subprocess.Popen[bytes], log: Path, marker: str) -> None:
    deadline = time.monotonic() + _START_LIMIT_S
    while marker not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{marker!r} never came:\n{log.read_text(errors='replace')}")
        time.sleep(0.1)


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        p.wait(timeout=30)


@contextlib.contextmanager
def emulated_engines(
    count: int, *, flags: Sequence[str] = (), core: int | None = None
) -> Iterator[list[str]]:
    """``count`` ``slotune emulate`` engines (real time), started together; yields base URLs."""
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        logs = [Path(tmp) / f"engine{i}.log" for i in range(count)]
        try:
            for log in logs:
                port = free_port()
                argv = [SLOTUNE, "emulate", "--model", MODEL, "--port", str(port), *flags]
                procs.append(_start(argv, log))
                urls.append(f"http://127.0.0.1:{port}")
                if core is not None:
                    pin(procs[-1].pid, core)
            for p, log in zip(procs, logs, strict=True):
                _wait_for(p, log, "Starting slotune emulated")
            yield urls
        finally:
            _stop(procs)


@contextlib.contextmanager
def stub_backend(core: int | None = None) -> Iterator[str]:
    """The fast stub backend (``_stub_backend.py``) in its own process; yields its base URL."""
    with tempfile.TemporaryDirectory() as tmp:
        log, port = Path(tmp) / "stub.log", free_port()
        stub = Path(__file__).with_name("_stub_backend.py")
        proc = _start([sys.executable, str(stub), "--port", str(port)], log)
        if core is not None:
            pin(proc.pid, core)
        try:
            _wait_for(proc, log, "Starting stub backend")
            yield f"http://127.0.0.1:{port}"
        finally:
            _stop([proc])


class Proxy(NamedTuple):
    url: str
    pid: int

    def cpu_s(self) -> float:
        """CPU time (user + system) the proxy process has used so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def route_proxy(urls: Sequence[str], policy: str, extra: str = "") -> Iterator[Proxy]:
    """``slotune route`` in front of ``urls`` with ``policy``; yields its URL and pid."""
    backends = "\n".join(
        f"  - {{name: e{i}, url: {u}, model: {MODEL}}}" for i, u in enumerate(urls)
    )
    with tempfile.TemporaryDirectory() as tmp:
        config, log = Path(tmp) / "fleet.yaml", Path(tmp) / "route.log"
        config.write_text(f"policy: {policy}\nbackends:\n{backends}\n{extra}")
        port = free_port()
        proc = _start([SLOTUNE, "route", "--config", str(config), "--port", str(port)], log)
        try:
            _wait_for(proc, log, "Starting slotune route")
            yield Proxy(f"http://127.0.0.1:{port}", proc.pid)
        finally:
            _stop([proc])


def bench(url: str, args: Sequence[str]) -> dict[str, Any]:
    """One ``slotune bench`` run (not stored); its JSON summary."""
    done = subprocess.run(
        [SLOTUNE, "bench", "--url", url, "--no-store", "--json", *args],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"slotune bench {' '.join(args)} failed: {done.stderr.strip()}")
    summary: dict[str, Any] = json.loads(done.stdout)["summary"]
    return summary
