"""The emulated engine's HTTP handlers (aiohttp) and the app that serves an engine's routes.

:class:`EngineRoutes` holds the handlers every engine shares (health, the model card, the
OpenAI completions and chat completions, Prometheus text) and hands requests to the
real-time engine; which of them an engine serves, under which paths and beside which routes
of its own, is its face's route table (:mod:`.faces`).
"""

from __future__ import annotations

import json
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CONTENT_TYPE_LATEST

from slotune.tuner.emulate.openai_api import (
    DONE,
    ApiError,
    ApiKind,
    GenerationRequest,
    ResponseFrame,
    bad_request,
    parse_request,
)
from slotune.tuner.emulate.prompts import output_text
from slotune.tuner.emulate.read_site import ReadTimes
from slotune.tuner.emulate.realtime import Arrival, RealtimeEngine, RequestHandle
from slotune.tuner.emulate.served import Exporter, ServedModel
from slotune.tuner.sim.request import RequestRejected

_FINISH_REASON = "length"  # the emulated request always runs to max_tokens


class EngineRoutes:
    """The handlers every emulated engine shares, over one real-time engine."""

    def __init__(
        self,
        engine: RealtimeEngine,
        model: ServedModel,
        exporter: Exporter,
        seed: int,
        reads: ReadTimes | None,
    ) -> None:
        self._engine = engine
        self._reads = reads
        self.model = model
        self._exporter = exporter
        self._seed = seed
        self.created = int(time.time())

    def openai_routes(self) -> list[web.RouteDef]:
        """``/health``, ``/v1/models``, ``/v1/completions`` and ``/v1/chat/completions``."""
        return [web.get("/v1/models", self.models), *self.generation_routes()]

    def generation_routes(self) -> list[web.RouteDef]:
        """``/health``, ``/v1/completions`` and ``/v1/chat/completions``."""
        return [
            web.get("/health", self.health),
            web.post("/v1/completions", self.completions),
            web.post("/v1/chat/completions", self.chat_completions),
        ]

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, _: web.Request) -> web.Response:
        return web.json_response({"version": self.model.version})

    async def models(self, _: web.Request) -> web.Response:
        m = self.model
        card = {
            "id": m.served_name,
            "object": "model",
            "created": self.created,
            "owned_by": m.owned_by,
            "root": m.root,
            "parent": None,
            "max_model_len": m.max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{uuid.uuid4().hex}",
                    "object": "model_permission",
                    "created": self.created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        return web.json_response({"object": "list", "data": [card]})

    async def prometheus(self, _: web.Request) -> web.Response:
        return web.Response(
            body=self._exporter.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, ApiKind.COMPLETION)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, ApiKind.CHAT)

    async def _generate(self, request: web.Request, kind: ApiKind) -> web.StreamResponse:
        received = self.arrival_of(request)
        prefix = "cmpl-" if kind is ApiKind.COMPLETION else "chatcmpl-"
        response_id = prefix + uuid.uuid4().hex
        try:
            try:
                body = await request.json()
            except json.JSONDecodeError as e:
                raise bad_request(f"The request body is not valid JSON: {e}") from e
            except (ValueError, RecursionError) as e:  # not UTF-8, 5000-digit ints, deep nesting
                raise bad_request(
                    f"The request body is not usable JSON ({type(e).__name__})"
                ) from e
            parsed = parse_request(body, kind, self.model.served_name, self.model.max_model_len)
            handle = self.submit(request, response_id, parsed, received)
        except ApiError as e:
            return web.json_response(e.body(), status=e.status)
        frame = ResponseFrame(kind, response_id, int(time.time()), self.model.served_name)
        text_seed = self.text_seed(parsed.prompt_token_ids)
        try:
            if parsed.stream:
                return await _stream(request, handle, frame, text_seed, parsed.include_usage)
            return await _collect(handle, frame, text_seed)
        finally:
            handle.close()

    def arrival_of(self, request: web.Request) -> Arrival:
        """When the request's bytes were read, or now when that is not known."""
        if self._reads is None:
            return Arrival.now()
        return self._reads.arrival_of(request.transport)

    def text_seed(self, prompt_token_ids: tuple[int, ...]) -> int:
        """Seeds the output words: like greedy decoding, the same prompt gives the same words."""
        return zlib.crc32(repr((self._seed, prompt_token_ids)).encode())

    def submit(
        self, request: web.Request, response_id: str, parsed: GenerationRequest, received: Arrival
    ) -> RequestHandle:
        """Hand a parsed request to the engine (``X-Request-Id`` names it in the timings).

        Raises:
            ApiError: 400 when the engine refuses the request.
        """
        timing_id = request.headers.get("X-Request-Id") or response_id
        try:
            return self._engine.submit(
                response_id,
                timing_id,
                parsed.prompt_token_ids,
                parsed.max_tokens,
                parsed.min_tokens,
                received,
                streamed=parsed.stream,
            )
        except RequestRejected as e:
            raise bad_request(str(e)) from e


async def _stream(
    request: web.Request,
    handle: RequestHandle,
    frame: ResponseFrame,
    seed: int,
    include_usage: bool,
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    sent = 0
    async for delivery in handle.deliveries():
        finish = _FINISH_REASON if delivery.is_finished else None
        events = []
        if sent == 0 and delivery.num_tokens and frame.kind is ApiKind.CHAT:
            events.append(frame.chunk("", None, with_role=True))
        if delivery.num_tokens or finish:
            text = output_text(seed, sent, delivery.num_tokens)
            events.append(frame.chunk(text, finish))
        sent += delivery.num_tokens
        data = b"".join(events)
        # Stamped as the bytes go to the socket: no client can read them before this.
        written_s = time.time()
        await response.write(data)
        handle.written(delivery.num_tokens, written_s)
    if include_usage:
        await response.write(frame.usage_chunk(handle.prompt_tokens, sent))
    await response.write(DONE)
    await response.write_eof()
    return response


async def _collect(handle: RequestHandle, frame: ResponseFrame, seed: int) -> web.Response:
    num_tokens = 0
    async for delivery in handle.deliveries():
        num_tokens += delivery.num_tokens
    text = output_text(seed, 0, num_tokens)
    body = frame.full_response(text, _FINISH_REASON, handle.prompt_tokens, num_tokens)
    return web.json_response(body)


@dataclass(frozen=True, slots=True)
class Served:
    """The engine-specific parts of one emulated server.

    Attributes:
        display_name: the engine as people name it (the start-up log line).
        model: the model card.
        exporter: the metrics, also fed the emulator's lag families.
        routes: the engine's route table, built from the generic handlers.
        middlewares: aiohttp middlewares the engine's server runs (its HTTP metrics).
    """

    display_name: str
    model: ServedModel
    exporter: Exporter
    routes: Callable[[EngineRoutes], Sequence[web.AbstractRouteDef]]
    middlewares: tuple[Middleware, ...] = ()


def create_app(
    engine: RealtimeEngine,
    served: Served,
    seed: int = 0,
    reads: ReadTimes | None = None,
) -> web.Application:
    """The aiohttp application serving ``engine`` with ``served``'s routes and metrics.

    Args:
        engine: the running real-time engine.
        served: the engine's model card, metrics, route table and middlewares.
        seed: seeds the output words (equal prompts give equal outputs).
        reads: when each connection last read bytes (served through
            :class:`~tuner.emulate.read_site.ReadStampingSite`); requests then arrive when
            their bytes were read, else when their handler starts.
    """
    routes = EngineRoutes(engine, served.model, served.exporter, seed, reads)
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=served.middlewares)
    route_table: Sequence[web.AbstractRouteDef] = served.routes(routes)
    app.add_routes(route_table)
    return app
