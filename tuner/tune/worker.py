"""A study in its own process, recorded in the store (the dashboard's "Start study").

:func:`start_worker` checks the spec, then starts ``python -m slotune.tuner.tune.worker`` in a new
session, so the study outlives the page that started it and a restart of the dashboard. The
worker records itself in the store (``study_worker``), beats every :data:`HEARTBEAT_S` while
the study runs and records how it ended: finished, failed (with the error's one line) or
cancelled (SIGTERM from :func:`cancel_worker`: the study stops after the trial that runs,
as Ctrl-C stops ``slotune tune``; it is left ``stopped`` and ``slotune tune resume``
continues it).

A worker that stopped beating (killed, machine rebooted) reads as dead: :func:`worker_view`.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from slotune.collector.errors import ConfigError, SlotuneError
from slotune.collector.store import (
    WorkerInfo,
    WorkerState,
    get_study,
    get_worker,
    open_store,
    save_worker,
    touch_worker,
)
from slotune.tuner.tune.study import StudySpec

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
HEARTBEAT_S = 2.0
# A running worker silent for this long is dead (missed beats: a loaded machine can delay some).
DEAD_AFTER_S = 15 * HEARTBEAT_S


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A worker as the dashboard shows it: ``state`` is the stored one, or ``died``."""

    info: WorkerInfo
    state: str
    is_alive: bool


def _host() -> str:
    return socket.gethostname()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_view(info: WorkerInfo, *, now: float | None = None) -> WorkerView:
    """Whether a worker still runs: a running worker whose process is gone (on this host) or
    that stopped beating reads as ``died``."""
    if info.state is not WorkerState.RUNNING:
        return WorkerView(info, info.state.value, False)
    silent = (time.time() if now is None else now) - info.heartbeat_at > DEAD_AFTER_S
    gone = info.host == _host() and not _pid_alive(info.pid)
    if silent or gone:
        return WorkerView(info, "died", False)
    return WorkerView(info, info.state.value, True)


def save_trace_upload(filename: str, data: bytes, directory: Path) -> Path:
    """Keep an uploaded trace file for a study, if it parses as a trace.

    The file is written under ``directory`` (a study reads its trace again when resumed) and
    removed again when it does not parse.

    Raises:
        ConfigError: the trace does not parse (naming its line) or is empty.
    """
    from slotune.collector.workload import load_trace

    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(filename).name) or "trace.jsonl"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}"
    path.write_bytes(data)
    try:
        load_trace(path)
    except ConfigError as e:
        path.unlink(missing_ok=True)
        raise ConfigError(f"uploaded trace {filename}: {e}".replace(str(path), filename)) from e
    return path


def start_worker(spec: StudySpec, url: str | None) -> WorkerInfo:
    """Check ``spec`` and start a worker process that runs it to the end.

    Args:
        spec: the study.
        url: the store URL (None: the default SQLite file).

    Returns:
        The worker as recorded.

    Raises:
        ConfigError: a bad name or spec, or a study of that name exists already.
    """
    if not NAME_RE.match(spec.name):
        raise ConfigError(
            f"study name {spec.name!r}: use letters, digits and '-_.' (at most 200 characters)"
        )
    spec.validate()
    with open_store(url) as store:
        if get_study(store, spec.name) is not None or get_worker(store, spec.name) is not None:
            raise ConfigError(
                f"a study named {spec.name!r} already exists; pick another study name"
            )
        argv = [sys.executable, "-m", "slotune.tuner.tune.worker", spec.to_json()]
        env = {**os.environ, "SLOTUNE_WORKER_DB": url or ""}
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        # A waiting thread reaps the worker when it ends (no zombie, no ResourceWarning).
        threading.Thread(target=proc.wait, daemon=True, name=f"reap-{proc.pid}").start()
        now = time.time()
        info = WorkerInfo(spec.name, proc.pid, _host(), WorkerState.RUNNING, now, now)
        save_worker(store, info)
    return info


def cancel_worker(url: str | None, study_name: str) -> WorkerInfo:
    """Stop a running worker (SIGTERM); the study is left stopped and can be resumed.

    Raises:
        ConfigError: no worker runs this study, or it runs on another machine.
    """
    with open_store(url) as store:
        info = get_worker(store, study_name)
    if info is None or not worker_view(info).is_alive:
        raise ConfigError(f"no worker is running study {study_name!r}; nothing to cancel")
    if info.host != _host():
        raise ConfigError(
            f"study {study_name!r} runs on {info.host}; cancel it there (kill {info.pid})"
        )
    os.kill(info.pid, signal.SIGTERM)
    return info


class _Cancel:
    """SIGTERM asks the study to stop at the next trial boundary (a clean point: the trial
    is stored, the study left ``stopped``); a second SIGTERM stops it at once."""

    def __init__(self) -> None:
        self.requested = threading.Event()

    def on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        if self.requested.is_set():
            raise KeyboardInterrupt
        self.requested.set()

    def on_progress(self, _progress: object) -> None:
        if self.requested.is_set():
            raise KeyboardInterrupt


def _beat(url: str | None, name: str, stop: threading.Event) -> None:
    with open_store(url) as store:
        while not stop.wait(HEARTBEAT_S):
            try:
                touch_worker(store, name)
            except SlotuneError:
                continue  # a busy store: the next beat tries again


def run_worker(spec: StudySpec, url: str | None) -> WorkerState:
    """Run a study in this process, recording the worker's state (the worker's main)."""
    from slotune.tuner import RunOptions, tune_study

    cancel = _Cancel()
    signal.signal(signal.SIGTERM, cancel.on_signal)
    started = time.time()

    def record(state: WorkerState, error: str = "") -> None:
        ended = None if state is WorkerState.RUNNING else time.time()
        info = WorkerInfo(
            spec.name, os.getpid(), _host(), state, started, time.time(), error, ended
        )
        with open_store(url) as store:
            save_worker(store, info)

    record(WorkerState.RUNNING)
    stop = threading.Event()
    beat = threading.Thread(target=_beat, args=(url, spec.name, stop), daemon=True)
    beat.start()
    try:
        tune_study(spec, url, RunOptions(), cancel.on_progress)
        state, error = WorkerState.FINISHED, ""
    except KeyboardInterrupt:
        state, error = WorkerState.CANCELLED, "cancelled from the dashboard"
    except SlotuneError as e:
        state, error = WorkerState.FAILED, str(e)
    except Exception as e:  # a worker must record why it stopped, whatever happened
        state, error = WorkerState.FAILED, f"{type(e).__name__}: {e}"
    finally:
        stop.set()
        beat.join(timeout=2 * HEARTBEAT_S)
    record(state, error.splitlines()[0] if error else "")
    return state


def main() -> None:
    spec = StudySpec.from_json(sys.argv[1])
    url = os.environ.get("SLOTUNE_WORKER_DB") or None
    state = run_worker(spec, url)
    sys.exit(0 if state in (WorkerState.FINISHED, WorkerState.CANCELLED) else 1)


if __name__ == "__main__":
    main()
