"""A hostile "server" on 127.0.0.1 for the load generator: raw bytes over TCP, no HTTP library.

Each request's reply comes from the mode named by its ``X-Request-Id`` (through
``mode_of``); every mode is a way a broken or malicious endpoint answers. It runs its own
event loop in a thread, so the code under test can call ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable
from enum import StrEnum


class Hostile(StrEnum):
    GARBAGE_SSE = "garbage_sse"  # an event that is not JSON
    TYPED_GARBAGE = "typed_garbage"  # JSON of the wrong types
    HTTP_500 = "http_500"
    HANG_AFTER_HEADERS = "hang_after_headers"
    DRIP = "drip"  # one byte at a time, without end
    CUT = "cut"  # a chunk, then the connection is closed
    ENDLESS = "endless"  # valid chunks as fast as possible, without end
    NON_HTTP = "non_http"  # not an HTTP reply at all
    HUGE_USAGE = "huge_usage"  # usage.completion_tokens 1e999
    HUGE_INT = "huge_int"  # a 400-digit token count
    HUGE_ERROR_CODE = "huge_error_code"  # in-stream error with code 1e999
    DEEP_NESTING = "deep_nesting"  # an event nested 100,000 deep


# What each mode's request must end as.
EXPECTED_ERROR = {
    Hostile.GARBAGE_SSE: "protocol",
    Hostile.TYPED_GARBAGE: "protocol",
    Hostile.HTTP_500: "http_5xx",
    Hostile.HANG_AFTER_HEADERS: "timeout",
    Hostile.DRIP: "timeout",
    Hostile.CUT: "disconnect",
    Hostile.ENDLESS: "timeout",
    Hostile.NON_HTTP: "protocol",
    Hostile.HUGE_USAGE: "protocol",
    Hostile.HUGE_INT: "protocol",
    Hostile.HUGE_ERROR_CODE: "http_5xx",
    Hostile.DEEP_NESTING: "protocol",
}

_SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
_TOKEN = b'data: {"choices":[{"index":0,"text":"a","finish_reason":null}]}\n\n'


def _event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


_ONE_SHOT: dict[Hostile, bytes] = {
    Hostile.GARBAGE_SSE: _SSE_HEAD + _TOKEN + b"data: {not json\n\ndata: [DONE]\n\n",
    Hostile.TYPED_GARBAGE: _SSE_HEAD + _event({"choices": [{"text": 5}]}) + b"data: [DONE]\n\n",
    Hostile.HTTP_500: (
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\nboom"
    ),
    # chunked framing, closed before the terminating chunk: the reply is incomplete
    Hostile.CUT: b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    + b"Transfer-Encoding: chunked\r\n\r\n"
    + f"{len(_TOKEN):x}\r\n".encode()
    + _TOKEN
    + b"\r\n",
    Hostile.NON_HTTP: b"SSH-2.0-OpenSSH_9.6\r\n",
    Hostile.HUGE_USAGE: _SSE_HEAD
    + _TOKEN
    + b'data: {"choices":[],"usage":{"completion_tokens":1e999}}\n\ndata: [DONE]\n\n',
    Hostile.HUGE_INT: _SSE_HEAD
    + _TOKEN
    + b'data: {"choices":[],"usage":{"completion_tokens":'
    + b"9" * 400
    + b"}}\n\ndata: [DONE]\n\n",
    Hostile.HUGE_ERROR_CODE: _SSE_HEAD + b'data: {"error":{"message":"x","code":1e999}}\n\n',
    Hostile.DEEP_NESTING: _SSE_HEAD + _TOKEN + b"data: " + b"[" * 100_000 + b"\n\n",
}


class HostileServer:
    """Answers every request on 127.0.0.1 the way its mode says."""

    def __init__(self, mode_of: Callable[[str], Hostile | bytes]) -> None:
        self.mode_of = mode_of
        self.num_requests = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HostileServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(timeout=10)
        return self

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._on_connect, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(self._serve(reader, writer))
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            headers = dict(
                line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line
            )
            length = int(headers.get("Content-Length", "0"))
            if length:
                await reader.readexactly(length)
            if "models" in head.split(b"\r\n", 1)[0].decode():
                body = json.dumps({"data": [{"id": "hostile"}]}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
                return
            self.num_requests += 1
            await self._reply(self.mode_of(headers.get("X-Request-Id", "")), writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _reply(self, mode: Hostile | bytes, writer: asyncio.StreamWriter) -> None:
        if isinstance(mode, bytes):  # a reply given byte for byte
            writer.write(mode)
            await writer.drain()
        elif mode in _ONE_SHOT:
            writer.write(_ONE_SHOT[mode])
            await writer.drain()
        elif mode is Hostile.HANG_AFTER_HEADERS:
            writer.write(_SSE_HEAD)
            await writer.drain()
            await asyncio.sleep(3600)
        elif mode is Hostile.DRIP:
            writer.write(_SSE_HEAD)
            for byte in _TOKEN * 10_000:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.01)
        elif mode is Hostile.ENDLESS:
            writer.write(_SSE_HEAD)
            while True:
                writer.write(_TOKEN * 64)
                await writer.drain()
                # drain() does not yield while the client keeps up: without this the loop
                # would starve the server's other connections (and, holding the GIL, the
                # client too)
                await asyncio.sleep(0)

    def stop(self) -> None:
        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            if self._server is not None:
                await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
