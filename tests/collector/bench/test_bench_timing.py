"""Send and read stamps: taken at the socket, never before the server could have acted."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
from aiohttp import web

from slotune.collector.bench.client import ClientOptions, Prompt, send_request, timing_trace_config
from slotune.collector.records import RequestRecord

PROMPT = Prompt(
    text="hello", messages=({"role": "user", "content": "hello"},), input_tokens=1, output_tokens=3
)


async def _two_requests_on_one_connection() -> list[tuple[float, RequestRecord, dict]]:
    server_times: dict[str, dict[str, object]] = {}

    async def completions(request: web.Request) -> web.StreamResponse:
        started_s = time.perf_counter()
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        writes = []
        for word in ("a", "b", "c"):
            await asyncio.sleep(0.01)
            chunk = {"choices": [{"index": 0, "text": word, "finish_reason": None}]}
            writes.append(time.perf_counter())
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        server_times[request.headers["X-Request-Id"]] = {"started_s": started_s, "writes_s": writes}
        return response

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    options = ClientOptions(base_url=f"http://127.0.0.1:{port}", model="m", timeout_s=5)
    out = []
    try:
        connector = aiohttp.TCPConnector(limit=1)  # the second request reuses the connection
        async with aiohttp.ClientSession(
            connector=connector, trace_configs=[timing_trace_config()]
        ) as session:
            for i in range(2):
                asked_s = time.perf_counter()
                result = await send_request(session, options, f"r{i}", PROMPT)
                out.append((asked_s, result.record, server_times[f"r{i}"]))
    finally:
        await runner.cleanup()
    return out


def test_send_and_chunk_stamps_bracket_the_servers_actions() -> None:
    for asked_s, record, server in asyncio.run(_two_requests_on_one_connection()):
        assert record.is_ok, record.error_detail
        assert asked_s <= record.send_s <= server["started_s"]
        token_times = [
            t for t, n in zip(record.chunk_times_s, record.chunk_tokens, strict=True) if n > 0
        ]
        assert len(token_times) == 3
        for read_s, written_s in zip(token_times, server["writes_s"], strict=True):
            assert written_s <= read_s  # no stamp from an earlier read on the connection
        assert record.end_s is not None and token_times[-1] <= record.end_s
