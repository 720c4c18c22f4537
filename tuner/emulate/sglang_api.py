"""SGLang's native HTTP API, as ``sglang.launch_server`` 0.5.23 serves it
(``sglang/srt/entrypoints/http_server.py``), beside the OpenAI routes every engine shares.

- ``POST /generate``: ``text`` or ``input_ids``, ``sampling_params.max_new_tokens`` (default
  128) and ``min_new_tokens``, ``stream``. The answer is ``{"text", "output_ids",
  "meta_info"}``; ``meta_info`` carries ``id``, ``finish_reason`` (None until the end, then
  ``{"type": "length", "length": N}``), ``prompt_tokens``, ``completion_tokens``,
  ``cached_tokens``, ``e2e_latency`` and the rest of SGLang's keys. Streamed, every
  ``data:`` event repeats the whole text so far (SGLang's default, without
  ``--incremental-streaming-output``) and the stream ends with ``data: [DONE]``.
- ``GET /health_generate`` (as ``/health``: 200 while the engine runs), ``GET /ready``;
- ``GET /model_info`` and its deprecated twin ``/get_model_info``;
- ``GET /server_info`` and its deprecated twin ``/get_server_info``: the server arguments
  (SGLang's names), ``max_total_num_tokens``, ``internal_states`` and ``version``;
- ``GET /v1/models`` and ``GET /v1/models/{model}``: SGLang's model cards (``root`` is the
  served name, ``owned_by`` ``sglang``, no ``permission``), or SGLang's 404 envelope.

Errors of ``/generate`` use SGLang's ``{"error": {"message": ...}}`` with status 400.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from slotune.tuner.emulate.app import EngineRoutes
from slotune.tuner.emulate.openai_api import (
    ApiError,
    ApiKind,
    GenerationRequest,
    bad_request,
)
from slotune.tuner.emulate.prompts import output_text, token_ids_of_text
from slotune.tuner.emulate.realtime import RequestHandle

SGLANG_VERSION = "0.5.23"
"""The SGLang release whose API and metrics the emulator follows."""
DEFAULT_MAX_NEW_TOKENS = 128
"""SGLang's ``SamplingParams.max_new_tokens`` default."""


@dataclass(frozen=True, slots=True)
class SglangServerInfo:
    """What ``/server_info`` reports besides the live state.

    Attributes:
        server_args: SGLang's server arguments by their own names (``model_path``,
            ``served_model_name``, ``context_length``, ``page_size``, ...).
        max_total_num_tokens: tokens of the KV pool.
    """

    server_args: Mapping[str, Any]
    max_total_num_tokens: int


def parse_generate(body: Any, context_len: int) -> GenerationRequest:
    """Validate a ``/generate`` body as SGLang reads it.

    Raises:
        ApiError: 400 naming the field at fault.
    """
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    if body.get("input_ids") is not None:
        ids = body["input_ids"]
        if not isinstance(ids, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids
        ):
            raise bad_request("input_ids must be a list of non-negative integer token ids.")
    elif isinstance(body.get("text"), str):
        ids = token_ids_of_text(body["text"])
    else:
        raise bad_request("Either text or input_ids should be provided (one prompt per request).")
    if not ids:
        raise bad_request("The input (text or input_ids) is empty.")
    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise bad_request("sampling_params must be an object.")
    max_new = params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    min_new = params.get("min_new_tokens", 0)
    for name, value in (("max_new_tokens", max_new), ("min_new_tokens", min_new)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise bad_request(f"sampling_params.{name} must be a non-negative integer.")
    if max_new == 0 or min_new > max_new:
        raise bad_request("sampling_params.max_new_tokens must be at least 1 and min_new_tokens.")
    if len(ids) + max_new > context_len:
        raise bad_request(
            f"Requested token count exceeds the model's maximum context length of "
            f"{context_len} tokens. You requested a total of {len(ids) + max_new} tokens: "
            f"{len(ids)} tokens from the input messages and {max_new} tokens for the "
            "completion. Please reduce the number of tokens in the input messages or the "
            "completion to fit within the limit."
        )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_request("stream must be a boolean.")
    return GenerationRequest(ApiKind.COMPLETION, tuple(ids), max_new, min_new, stream, False)


def _error(e: ApiError) -> web.Response:
    return web.json_response({"error": {"message": e.message}}, status=e.status)


class _Native:
    def __init__(self, r: EngineRoutes, info: SglangServerInfo) -> None:
        self._r = r
        self._info = info

    async def ok(self, _: web.Request) -> web.Response:
        return web.Response(status=200)

    async def model_info(self, _: web.Request) -> web.Response:
        m = self._r.model
        args = self._info.server_args
        return web.json_response(
            {
                "model_path": m.root,
                "served_model_name": m.served_name,
                "tokenizer_path": args.get("tokenizer_path", m.root),
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "load_format": args.get("load_format", "auto"),
                "reasoning_parser": None,
                "tool_call_parser": None,
                "disaggregation_mode": "null",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": None,
                "architectures": None,
            }
        )

    async def server_info(self, _: web.Request) -> web.Response:
        return web.json_response(
            {
                **self._info.server_args,
                "max_total_num_tokens": self._info.max_total_num_tokens,
                "max_req_input_len": self._r.model.max_model_len - 1,
                "internal_states": [{"last_gen_throughput": 0.0}],
                "version": SGLANG_VERSION,
                "frontend": "python",
            }
        )

    def _card(self) -> dict[str, Any]:
        m = self._r.model
        return {
            "id": m.served_name,
            "object": "model",
            "created": self._r.created,
            "owned_by": "sglang",
            "root": m.served_name,
            "parent": None,
            "max_model_len": m.max_model_len,
        }

    async def models(self, _: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [self._card()]})

    async def model_card(self, request: web.Request) -> web.Response:
        name = request.match_info["model"]
        if name != self._r.model.served_name:
            return web.json_response(
                {
                    "error": {
                        "message": f"The model '{name}' does not exist",
                        "type": "invalid_request_error",
                        "param": "model",
                        "code": "model_not_found",
                    }
                },
                status=404,
            )
        return web.json_response(self._card())

    async def generate(self, request: web.Request) -> web.StreamResponse:
        received = self._r.arrival_of(request)
        rid = uuid.uuid4().hex
        try:
            try:
                body = await request.json()
            except (ValueError, RecursionError) as e:
                raise bad_request(
                    f"The request body is not usable JSON ({type(e).__name__})"
                ) from e
            parsed = parse_generate(body, self._r.model.max_model_len)
            handle = self._r.submit(request, rid, parsed, received)
        except ApiError as e:
            return _error(e)
        reply = _Reply(rid, handle, self._r.text_seed(parsed.prompt_token_ids), received.wall_s)
        try:
            if parsed.stream:
                return await reply.stream(request)
            return await reply.collect()
        finally:
            handle.close()


class _Reply:
    """One ``/generate`` answer being built as tokens arrive."""

    def __init__(self, rid: str, handle: RequestHandle, seed: int, arrival_s: float) -> None:
        self._rid = rid
        self._handle = handle
        self._seed = seed
        self._arrival_s = arrival_s
        self.num_tokens = 0

    def body(self, is_finished: bool) -> dict[str, Any]:
        text = output_text(self._seed, 0, self.num_tokens)
        finish = {"type": "length", "length": self.num_tokens} if is_finished else None
        meta = {
            "id": self._rid,
            "finish_reason": finish,
            "prompt_tokens": self._handle.prompt_tokens,
            "weight_version": "default",
            "num_retractions": 0,
            "reasoning_tokens": 0,
            "completion_tokens": self.num_tokens,
            "cached_tokens": self._handle.cached_tokens,
            "e2e_latency": time.time() - self._arrival_s,
        }
        return {"text": text, "output_ids": token_ids_of_text(text), "meta_info": meta}

    async def collect(self) -> web.Response:
        async for delivery in self._handle.deliveries():
            self.num_tokens += delivery.num_tokens
        return web.json_response(self.body(is_finished=True))

    async def stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        async for delivery in self._handle.deliveries():
            self.num_tokens += delivery.num_tokens
            if not delivery.num_tokens and not delivery.is_finished:
                continue
            data = b"data: " + json.dumps(self.body(delivery.is_finished)).encode() + b"\n\n"
            written_s = time.time()
            await response.write(data)
            self._handle.written(delivery.num_tokens, written_s)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def sglang_routes(r: EngineRoutes, info: SglangServerInfo) -> list[web.RouteDef]:
    """SGLang's native routes over the shared handlers ``r``."""
    native = _Native(r, info)
    return [
        web.get("/health_generate", native.ok),
        web.get("/ready", native.ok),
        web.get("/model_info", native.model_info),
        web.get("/get_model_info", native.model_info),
        web.get("/server_info", native.server_info),
        web.get("/get_server_info", native.server_info),
        web.get("/v1/models", native.models),
        web.get("/v1/models/{model}", native.model_card),
        web.post("/generate", native.generate),
        web.put("/generate", native.generate),
    ]
