"""A fast OpenAI-compatible stub backend, to measure what ``slotune route`` itself adds.

Raw asyncio, no web framework: it answers every ``POST`` with the same streamed completion
(chunked SSE: a first event at once, the rest on the next loop turn, then ``[DONE]``, with
``usage``), ``GET /v1/models`` with one model and ``GET /metrics`` with an idle vLLM's
gauges, on kept-alive HTTP/1.1 connections. It holds thousands of requests a second on one
core, so what a run through the proxy adds over a direct run is the proxy's.

    .venv/bin/python benchmarks/_stub_backend.py --port 8001
"""

from __future__ import annotations

import argparse
import asyncio
import json

from _route import MODEL

_EVENT = {
    "id": "cmpl-stub",
    "object": "text_completion",
    "created": 0,
    "model": MODEL,
    "choices": [{"index": 0, "text": " x", "logprobs": None, "finish_reason": None}],
}
_NUM_TOKENS = 4


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _sse(event: dict[str, object]) -> bytes:
    return _chunk(b"data: " + json.dumps(event).encode() + b"\n\n")


_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
_FIRST = _HEAD + _sse(_EVENT)
_LAST = _sse(
    {
        **_EVENT,
        "choices": [{"index": 0, "text": " x", "logprobs": None, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 16, "completion_tokens": _NUM_TOKENS, "total_tokens": 20},
    }
)
_REST = _sse(_EVENT) * (_NUM_TOKENS - 2) + _LAST + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


def _plain(content_type: bytes, body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        content_type,
        len(body),
        body,
    )


_MODELS = _plain(
    b"application/json",
    json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode(),
)
_METRICS = _plain(
    b"text/plain; version=0.0.4",
    "".join(
        f'vllm:{name}{{model_name="{MODEL}"}} 0.0\n'
        for name in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc")
    ).encode(),
)


class _Stub(asyncio.Protocol):
    """One connection: requests parsed by their head and ``Content-Length``, in order."""

    def __init__(self) -> None:
        self._buf = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while (end := self._buf.find(b"\r\n\r\n")) >= 0:
            head = self._buf[:end].lower()
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if len(self._buf) < end + 4 + length:
                return  # the body is still coming
            self._buf = self._buf[end + 4 + length :]
            self._answer(head.split(b" ", 2)[:2])

    def _answer(self, method_path: list[bytes]) -> None:
        assert self._transport is not None
        if method_path == [b"get", b"/metrics"]:
            self._transport.write(_METRICS)
        elif method_path == [b"get", b"/v1/models"]:
            self._transport.write(_MODELS)
        else:
            self._transport.write(_FIRST)
            # the rest on the next loop turn: a stream in two reads, as an engine sends one
            asyncio.get_running_loop().call_soon(self._transport.write, _REST)


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Stub, "127.0.0.1", port, backlog=2048)
    print(f"Starting stub backend on http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    asyncio.run(serve(ap.parse_args().port))


if __name__ == "__main__":
    main()
