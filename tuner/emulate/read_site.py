"""A TCP site whose connections note when they last read bytes off the socket.

aiohttp starts a request handler one or two event-loop turns after the request's bytes were
read, and a turn can take milliseconds while the engine writes a step's chunks to many
streams. A request's arrival is when the server received it, so the handler takes its
arrival from the read that completed the request (:meth:`ReadTimes.arrival_of`) rather than
from the moment it got to run.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from slotune.tuner.emulate.realtime import Arrival

# uvicorn's default, which vLLM's API server keeps: a burst of new connections while the loop
# is busy waits in the kernel's queue instead of having its SYNs dropped (asyncio's default
# is 100)
BACKLOG = 2048


class ReadTimes:
    """The last read on each open connection, keyed by its transport."""

    def __init__(self) -> None:
        self._last: dict[asyncio.BaseTransport, Arrival] = {}

    def arrival_of(self, transport: asyncio.BaseTransport | None) -> Arrival:
        """When the connection last read bytes (the read that completed the request being
        handled, since a client sends the next request only after this one's response);
        now if the connection is unknown."""
        last = self._last.get(transport) if transport is not None else None
        return last if last is not None else Arrival.now()

    def note(self, transport: asyncio.BaseTransport) -> None:
        self._last[transport] = Arrival.now()

    def forget(self, transport: asyncio.BaseTransport) -> None:
        self._last.pop(transport, None)


class _ReadStamper(asyncio.Protocol):
    """Wraps aiohttp's protocol for one connection; stamps each read before parsing it."""

    def __init__(self, inner: asyncio.Protocol, reads: ReadTimes) -> None:
        self._inner = inner
        self._reads = reads
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._transport is not None:
            self._reads.note(self._transport)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._reads.forget(self._transport)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class ReadStampingSite(web.BaseSite):
    """Serves ``runner``'s application on ``host:port``, noting reads in ``reads``."""

    __slots__ = ("_host", "_port", "_reads")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, reads: ReadTimes) -> None:
        super().__init__(runner)
        self._host = host
        self._port = port
        self._reads = reads

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def port(self) -> int:
        """The bound port (the requested one, or the one the OS chose for port 0)."""
        server = self._server
        sockets = server.sockets if isinstance(server, asyncio.Server) else ()
        return int(sockets[0].getsockname()[1]) if sockets else self._port

    async def start(self) -> None:
        await super().start()
        factory = self._runner.server
        assert factory is not None  # BaseSite refuses a runner that was not set up
        reads = self._reads
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _ReadStamper(factory(), reads), self._host, self._port, backlog=BACKLOG
        )
