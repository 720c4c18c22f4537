"""Test helpers for ``slotune route``: emulated engines started side by side (killable), fake
broken backends, and the proxy serving from a background thread.

The engines are real ``slotune emulate`` processes, started all at once (each takes seconds
to import the simulator on a small machine), each with its process handle so a test can kill
one mid-run.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from _tools import SLOTUNE, free_port

from slotune.tuner.fleet.policy import RoutingPolicy
from slotune.tuner.fleet.proxy import RouteProxy
from slotune.tuner.fleet.route_config import RouteConfig, parse_route_config
from slotune.tuner.fleet.route_server import run_proxy

MODEL = "llama-3.1-8b"
_START_LIMIT_S = 120.0


@dataclass
class Engine:
    """One ``slotune emulate`` process."""

    url: str
    proc: subprocess.Popen[str]

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, like a crashed engine or a lost node."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=15)


@contextlib.contextmanager
def engines(count: int, *, speedup: float, extra: tuple[str, ...] = ()) -> Iterator[list[Engine]]:
    """``count`` emulated engines (llama-3.1-8b on h100-sxm), started in parallel."""
    started: list[Engine] = []
    try:
        for _ in range(count):
            port = free_port()
            proc = subprocess.Popen(
                [
                    SLOTUNE,
                    "emulate",
                    "--model",
                    MODEL,
                    "--port",
                    str(port),
                    "--speedup",
                    str(speedup),
                    *extra,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            started.append(Engine(f"http://127.0.0.1:{port}", proc))
        for e in started:
            assert e.proc.stdout is not None
            for line in e.proc.stdout:
                if "Starting slotune emulated" in line:
                    break
            else:
                raise AssertionError(f"emulator at {e.url} did not start")
        yield started
    finally:
        for e in started:
            if e.proc.poll() is None:
                e.proc.terminate()
            e.proc.communicate(timeout=15)


def fleet_yaml(urls: list[str], *, policy: str = "least-requests", extra: str = "") -> str:
    """A fleet file of one pool serving MODEL at ``urls``."""
    backends = "\n".join(
        f"  - {{name: b{i}, url: {u}, model: {MODEL}}}" for i, u in enumerate(urls)
    )
    return f"policy: {policy}\nbackends:\n{backends}\npoll_interval: 100ms\n{extra}"


class RunningProxy:
    """A :class:`RouteProxy` served on 127.0.0.1 from a background thread's event loop."""

    def __init__(self, config: RouteConfig, policy: RoutingPolicy | None = None) -> None:
        self.proxy = RouteProxy(config, policy)
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)
        self.error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _main(self) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await run_proxy(self.proxy, "127.0.0.1", 0, self._stop, self._on_ready)

        try:
            asyncio.run(run())
        except BaseException as e:  # surfaced by start() / close()
            self.error = e
            self._ready.set()

    def _on_ready(self, port: int) -> None:
        self.port = port
        self._ready.set()

    def start(self) -> RunningProxy:
        self._thread.start()
        assert self._ready.wait(30), "proxy did not start"
        if self.error is not None:
            raise self.error
        return self

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "proxy did not stop"
        if self.error is not None:
            raise self.error


@contextlib.contextmanager
def running_proxy(
    yaml_text: str, policy: RoutingPolicy | None = None, tmp: Path | None = None
) -> Iterator[RunningProxy]:
    config = parse_route_config(yaml_text, source=str(tmp or "fleet.yaml"))
    proxy = RunningProxy(config, policy).start()
    try:
        yield proxy
    finally:
        proxy.close()


def wait_until(check: object, limit_s: float = 20.0, step_s: float = 0.05) -> bool:
    """Poll ``check()`` until true, at most ``limit_s`` (bounded: never hangs a test)."""
    assert callable(check)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step_s)
    return bool(check())


class FakeBackend:
    """A TCP server on 127.0.0.1 that answers every connection with ``reply`` (None: never).

    ``reply=None`` stands in for a hung engine (accepts, reads, never answers); bytes that
    are not HTTP stand in for a broken one.
    """

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._conns: list[socket.socket] = []
        self.received: list[bytes] = []  # the first read of each connection
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            self._conns.append(conn)
            if self.reply is not None:
                with contextlib.suppress(OSError):
                    self.received.append(conn.recv(65536))
                    conn.sendall(self.reply)
                    conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        for c in self._conns:
            c.close()
        self._sock.close()


class ConnectionCounter:
    """A TCP relay on 127.0.0.1 in front of ``target`` that counts the connections it accepts.

    Put its ``url`` in the fleet file instead of the engine's: every upstream connection the
    proxy opens to the engine is one accepted here.
    """

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").split(":")
        self._target = (host, int(port))
        self.num_accepted = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._relay, "127.0.0.1", 0)
        )
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.num_accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
            self._writers.add(up_writer)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except OSError:
            writer.close()
        finally:
            self._tasks.discard(task)

    def close(self) -> None:
        async def shut() -> None:
            self._server.close()
            for w in self._writers:
                w.close()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
