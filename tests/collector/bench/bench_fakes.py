"""A fake OpenAI-compatible engine on 127.0.0.1 that streams, errors, stalls and drops.

It runs its own event loop in a thread, so the code under test can call ``asyncio.run``.
Each request's behaviour comes from ``mode_of(request_id)``; every request's headers and
body are kept for the test to inspect.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from aiohttp import web


class Mode(StrEnum):
    OK = "ok"
    HTTP_500 = "http_500"
    HTTP_429 = "http_429"
    STALL = "stall"  # headers sent, then nothing
    DROP = "drop"  # a few chunks, then the connection is cut
    GARBAGE = "garbage"  # an event that is not JSON
    NO_DONE = "no_done"  # stream ends cleanly without [DONE] or finish_reason


class Flavour(StrEnum):
    VLLM = "vllm"  # one token per chunk, usage-only final chunk
    SGLANG = "sglang"  # usage: null on every chunk, null-content finish chunk
    TRTLLM = "trtllm"  # two tokens per chunk with logprobs
    OPENAI = "openai"  # CRLF, keep-alive comments, multi-line data


@dataclass
class FakeEngine:
    """The fake server's settings and what it saw."""

    flavour: Flavour = Flavour.VLLM
    token_delay_s: float = 0.002
    first_token_delay_s: float = 0.005
    mode_of: Callable[[str], Mode] = lambda _rid: Mode.OK
    seen: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- handlers -------------------------------------------------------------------

    async def models(self, _req: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
        )

    async def generate(self, req: web.Request) -> web.StreamResponse:
        body = await req.json()
        rid = req.headers.get("X-Request-Id", "")
        self.seen.append(
            {"headers": req.headers.copy(), "body": body, "path": req.path, "time": time.time()}
        )
        mode = self.mode_of(rid)
        if mode is Mode.HTTP_500:
            return web.json_response({"error": {"message": "boom", "code": 500}}, status=500)
        if mode is Mode.HTTP_429:
            return web.json_response({"error": {"message": "slow down", "code": 429}}, status=429)
        n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        chat = req.path.endswith("/chat/completions")
        if not body.get("stream"):
            await asyncio.sleep(self.first_token_delay_s + n * self.token_delay_s)
            return web.json_response(_whole(chat, n))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        if mode is Mode.STALL:
            await asyncio.sleep(3600)
        await asyncio.sleep(self.first_token_delay_s)
        # The client may go away mid-stream (a cancelled cool-down request).
        with contextlib.suppress(ConnectionResetError):
            await self._stream(resp, req, mode, _events(self.flavour, chat, n))
        return resp

    async def _stream(
        self, resp: web.StreamResponse, req: web.Request, mode: Mode, events: list[bytes]
    ) -> None:
        for k, event in enumerate(events):
            if mode is Mode.DROP and k == 3:
                assert req.transport is not None
                req.transport.abort()
                return
            if mode is Mode.GARBAGE and k == 2:
                await resp.write(b"data: {not json\n\n")
                break
            if mode is Mode.NO_DONE and k == 2:
                break
            await resp.write(event)
            if k > 0 and k < len(events) - 2:
                await asyncio.sleep(self.token_delay_s)
        await resp.write_eof()

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            app = web.Application()
            app.router.add_get("/v1/models", self.models)
            app.router.add_post("/v1/completions", self.generate)
            app.router.add_post("/v1/chat/completions", self.generate)
            runner = web.AppRunner(app, shutdown_timeout=0.1)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self._runner = runner
            sock = site._server.sockets[0]  # type: ignore[union-attr]
            self.port = sock.getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        assert ready.wait(10)

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None


WORDS = ("alpha", "beta", "gamma", "delta")


def _chunk(
    chat: bool,
    text: str | None,
    finish: str | None = None,
    *,
    role: bool = False,
    usage: dict[str, int] | None = None,
    extra: dict[str, Any] | None = None,
    empty: bool = False,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": "x",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": 1,
        "model": "fake-model",
    }
    if empty:
        obj["choices"] = []
    elif chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {"content": text}
        obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish, **(extra or {})}]
    else:
        obj["choices"] = [
            {"index": 0, "text": text or "", "finish_reason": finish, **(extra or {})}
        ]
    obj["usage"] = usage
    return obj


def _events(flavour: Flavour, chat: bool, n: int) -> list[bytes]:
    """SSE events of one response with ``n`` output tokens, in the flavour's shape."""
    usage = {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n}
    per = 2 if flavour is Flavour.TRTLLM else 1
    objs: list[dict[str, Any]] = []
    if chat:
        objs.append(_chunk(chat, None, role=True))
    for k in range(0, n, per):
        words = [f" {WORDS[j % 4]}" for j in range(k, min(k + per, n))]
        last = k + per >= n
        extra = (
            {"logprobs": {"tokens": words, "token_logprobs": [-0.1] * len(words)}}
            if flavour is Flavour.TRTLLM
            else {}
        )
        finish = "length" if last and flavour is not Flavour.SGLANG else None
        objs.append(_chunk(chat, "".join(words), finish, extra=extra))
    if flavour is Flavour.SGLANG:
        objs.append(_chunk(chat, None, "length"))
    objs.append(_chunk(chat, None, usage=usage, empty=True))
    if flavour is Flavour.OPENAI:
        out = [b": keep-alive\r\n\r\n"]
        for o in objs:
            text = json.dumps(o)
            cut = text.index(', "choices"') + 1  # between two keys: still one JSON object
            out.append(f"data: {text[:cut]}\r\ndata: {text[cut:]}\r\n\r\n".encode())
        out.append(b"data: [DONE]\r\n\r\n")
        return out
    return [f"data: {json.dumps(o)}\n\n".encode() for o in objs] + [b"data: [DONE]\n\n"]


def _whole(chat: bool, n: int) -> dict[str, Any]:
    text = "".join(f" {WORDS[j % 4]}" for j in range(n))
    choice = (
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
        if chat
        else {"index": 0, "text": text, "finish_reason": "length"}
    )
    return {
        "id": "x",
        "object": "chat.completion" if chat else "text_completion",
        "model": "fake-model",
        "choices": [choice],
        "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n},
    }
