"""The emulated engine's HTTP routes (aiohttp), laid out like ``vllm serve`` / ``trtllm-serve``.

Both engines serve ``/health``, ``/version``, ``/v1/models``, ``/v1/completions`` and
``/v1/chat/completions``. vLLM mode serves Prometheus text on ``/metrics``; TensorRT-LLM mode
serves the iteration-stats JSON on ``/metrics`` and Prometheus text on ``/prometheus/metrics``.
"""

from __future__ import annotations

import json
import time
import uuid
import zlib
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from slotune.tuner.sim.emulate.openai_api import (
    DONE,
    ApiError,
    ApiKind,
    GenerationRequest,
    ResponseFrame,
    bad_request,
    parse_request,
)
from slotune.tuner.sim.emulate.prompts import output_text
from slotune.tuner.sim.emulate.read_site import ReadTimes
from slotune.tuner.sim.emulate.realtime import Arrival, RealtimeEngine, RequestHandle
from slotune.tuner.sim.emulate.trtllm_metrics import TrtllmMetrics
from slotune.tuner.sim.emulate.vllm_metrics import VllmMetrics
from slotune.tuner.sim.request import RequestRejected

_FINISH_REASON = "length"  # the emulated request always runs to max_tokens


@dataclass(frozen=True, slots=True)
class ServedModel:
    """What ``/v1/models`` tells clients about the served model."""

    served_name: str
    root: str
    max_model_len: int
    owned_by: str
    version: str


class _Routes:
    def __init__(
        self,
        engine: RealtimeEngine,
        model: ServedModel,
        metrics: VllmMetrics | TrtllmMetrics,
        seed: int,
        reads: ReadTimes | None,
    ) -> None:
        self._engine = engine
        self._reads = reads
        self._model = model
        self._metrics = metrics
        self._seed = seed
        self._created = int(time.time())

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, _: web.Request) -> web.Response:
        return web.json_response({"version": self._model.version})

    async def models(self, _: web.Request) -> web.Response:
        m = self._model
        card = {
            "id": m.served_name,
            "object": "model",
            "created": self._created,
            "owned_by": m.owned_by,
            "root": m.root,
            "parent": None,
            "max_model_len": m.max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{uuid.uuid4().hex}",
                    "object": "model_permission",
                    "created": self._created,
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
            body=self._metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def iteration_stats(self, _: web.Request) -> web.Response:
        assert isinstance(self._metrics, TrtllmMetrics)
        return web.json_response(self._metrics.drain_iterations())

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, ApiKind.COMPLETION)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, ApiKind.CHAT)

    async def _generate(self, request: web.Request, kind: ApiKind) -> web.StreamResponse:
        received = (
            self._reads.arrival_of(request.transport) if self._reads is not None else Arrival.now()
        )
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
            parsed = parse_request(body, kind, self._model.served_name, self._model.max_model_len)
            handle = self._submit(request, response_id, parsed, received)
        except ApiError as e:
            return web.json_response(e.body(), status=e.status)
        frame = ResponseFrame(kind, response_id, int(time.time()), self._model.served_name)
        text_seed = _text_seed(parsed.prompt_token_ids, self._seed)
        try:
            if parsed.stream:
                return await _stream(request, handle, frame, text_seed, parsed.include_usage)
            return await _collect(handle, frame, text_seed)
        finally:
            handle.close()

    def _submit(
        self, request: web.Request, response_id: str, parsed: GenerationRequest, received: Arrival
    ) -> RequestHandle:
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


def _text_seed(prompt_token_ids: tuple[int, ...], seed: int) -> int:
    # Like greedy decoding: the same prompt gives the same output words.
    return zlib.crc32(repr((seed, prompt_token_ids)).encode())


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


def create_app(
    engine: RealtimeEngine,
    model: ServedModel,
    metrics: VllmMetrics | TrtllmMetrics,
    seed: int = 0,
    reads: ReadTimes | None = None,
) -> web.Application:
    """The aiohttp application serving ``engine`` under ``model``'s name.

    Args:
        engine: the running real-time engine.
        model: names and limits shown by ``/v1/models``.
        metrics: the exporter whose routes to serve (vLLM or TensorRT-LLM).
        seed: seeds the output words (equal prompts give equal outputs).
        reads: when each connection last read bytes (served through
            :class:`~tuner.sim.emulate.read_site.ReadStampingSite`); requests then arrive when
            their bytes were read, else when their handler starts.
    """
    routes = _Routes(engine, model, metrics, seed, reads)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/health", routes.health)
    app.router.add_get("/version", routes.version)
    app.router.add_get("/v1/models", routes.models)
    app.router.add_post("/v1/completions", routes.completions)
    app.router.add_post("/v1/chat/completions", routes.chat_completions)
    if isinstance(metrics, TrtllmMetrics):
        app.router.add_get("/metrics", routes.iteration_stats)
        app.router.add_get("/prometheus/metrics", routes.prometheus)
    else:
        app.router.add_get("/metrics", routes.prometheus)
    return app
