"""Arrival stamps: a request arrives when its bytes were read, not when its handler ran."""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web

from slotune.tuner.emulate.read_site import ReadStampingSite, ReadTimes


async def _pipelined_arrivals() -> list[dict[str, float]]:
    reads = ReadTimes()

    async def handle(request: web.Request) -> web.Response:
        arrival = reads.arrival_of(request.transport)
        started_s = time.time()
        if request.path == "/slow":
            await asyncio.sleep(0.2)
        return web.json_response({"arrival_s": arrival.wall_s, "started_s": started_s})

    app = web.Application()
    app.router.add_get("/slow", handle)
    app.router.add_get("/fast", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = ReadStampingSite(runner, "127.0.0.1", 0, reads)
    await site.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
        # Both requests in one write: the second waits behind the first's 0.2 s handler.
        writer.write(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\nGET /fast HTTP/1.1\r\nHost: t\r\n\r\n")
        await writer.drain()
        bodies = []
        for _ in range(2):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            length = int(
                next(
                    line.split(b":")[1]
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
            )
            bodies.append(json.loads(await reader.readexactly(length)))
        writer.close()
        return bodies
    finally:
        await runner.cleanup()


def test_a_request_arrives_when_read_not_when_its_handler_starts() -> None:
    slow, fast = asyncio.run(_pipelined_arrivals())
    # One read carried both requests: one arrival, before either handler ran, although the
    # second handler started only after the first one's sleep.
    assert fast["arrival_s"] == slow["arrival_s"] <= slow["started_s"] < fast["started_s"]
