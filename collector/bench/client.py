"""One streaming request to an OpenAI-compatible endpoint, timed chunk by chunk.

Times come from :func:`time.perf_counter` (monotonic, sub-microsecond). A request's send time
is when its bytes are handed to the socket (sessions built with :func:`timing_trace_config`;
else just before aiohttp is asked to send it), not when the coroutine asked: on Python < 3.12
aiohttp writes the body from a separate task, a loop turn later. Each read from the
socket is stamped as it happens (:class:`_ReadClock`), and every event that read completed
gets that stamp. With many streams, the event loop reads a burst of chunks off their
sockets first and resumes each stream's reader after; stamping at the socket read keeps the
client's own queueing out of TTFT and ITL. Errors never raise: they become the record's
``error`` kind.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import aiohttp

from slotune.collector.bench.sse import DONE, Chunk, ProtocolError, SSEDecoder, parse_chunk
from slotune.collector.errors import ConfigError
from slotune.collector.records import UNTIMED_GAP_BOUNDS_S, RequestRecord, untimed_gap_bucket
from slotune.collector.redact import redact_url
from slotune.collector.vocabulary import Endpoint as Endpoint
from slotune.collector.workload.tokens import count_tokens

# A 16k-token output streamed one token per chunk is timed whole; past it chunks are only
# counted, so a stream without end costs bounded memory and a bounded parse (~0.2 s here).
DEFAULT_MAX_TIMED_CHUNKS = 16_384


class ErrorKind(StrEnum):
    TIMEOUT = "timeout"
    CONNECT = "connect"
    DISCONNECT = "disconnect"
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    PROTOCOL = "protocol"


@dataclass(frozen=True, slots=True)
class Prompt:
    """What to send: plain text (completions) and chat messages carry the same content.

    Attributes:
        text: the prompt as one string (``/v1/completions``).
        messages: the same prompt as chat messages (``/v1/chat/completions``).
        input_tokens: the prompt's length under the token counter that built it.
        output_tokens: tokens to generate (``max_tokens``; ``min_tokens`` with ignore_eos).
    """

    text: str
    messages: tuple[dict[str, str], ...]
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """How to talk to the server.

    Attributes:
        base_url: server root, e.g. ``http://127.0.0.1:8000`` (a trailing ``/v1`` is accepted).
        model: model name sent in each request.
        endpoint: completions or chat.
        timeout_s: whole-request limit (connect, wait, stream).
        api_key: sent as ``Authorization: Bearer``; never logged or stored.
        stream: SSE streaming (True) or one JSON response.
        ignore_eos: ask vLLM-style servers to produce exactly ``output_tokens``
            (``ignore_eos`` + ``min_tokens``); turn off for servers that reject unknown fields.
        max_timed_chunks: chunks of one response whose arrival times are kept; past it
            chunks are only counted (see :class:`~collector.records.RequestRecord`).
    """

    base_url: str
    model: str
    endpoint: Endpoint = Endpoint.COMPLETIONS
    timeout_s: float = 600.0
    api_key: str | None = None
    stream: bool = True
    ignore_eos: bool = True
    max_timed_chunks: int = DEFAULT_MAX_TIMED_CHUNKS


@dataclass(frozen=True, slots=True)
class ClientResult:
    """A record plus the client's own token count (a diagnostic against the server usage)."""

    record: RequestRecord
    client_output_tokens: int


def normalize_base_url(url: str) -> str:
    """``http://h:8000/v1/`` -> ``http://h:8000``; rejects anything but http(s) URLs."""
    u = url.strip().rstrip("/")
    if not u.startswith(("http://", "https://")):
        raise ConfigError(
            f"--url {redact_url(url)!r} must start with http:// or https://, "
            "e.g. http://127.0.0.1:8000"
        )
    return u[:-3] if u.endswith("/v1") else u


def headers(api_key: str | None) -> dict[str, str]:
    h = {"Content-Type": "application/json"}
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    return h


def request_body(options: ClientOptions, prompt: Prompt) -> dict[str, Any]:
    """The JSON body for one request."""
    body: dict[str, Any] = {"model": options.model, "stream": options.stream, "temperature": 0.0}
    if options.endpoint is Endpoint.COMPLETIONS:
        body["prompt"] = prompt.text
        body["max_tokens"] = prompt.output_tokens
    else:
        body["messages"] = list(prompt.messages)
        body["max_completion_tokens"] = prompt.output_tokens
    if options.stream:
        body["stream_options"] = {"include_usage": True}
    if options.ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = prompt.output_tokens
    return body


# A model list is a few kilobytes; a server that streams more is not answering one.
_MAX_MODELS_BYTES = 1 << 20


async def _models_json(resp: aiohttp.ClientResponse) -> Any:
    """The ``/v1/models`` body as JSON, read up to 1 MiB.

    Raises:
        ValueError: the body is longer, not UTF-8, or not JSON.
        RecursionError: it nests deeper than the parser's stack.
    """
    body = bytearray()
    while len(body) <= _MAX_MODELS_BYTES:
        chunk = await resp.content.read(_MAX_MODELS_BYTES + 1 - len(body))
        if not chunk:
            return json.loads(bytes(body))
        body += chunk
    raise ValueError(f"a model list longer than {_MAX_MODELS_BYTES} bytes")


async def discover_model(
    session: aiohttp.ClientSession, base_url: str, api_key: str | None, timeout_s: float = 10.0
) -> str:
    """The first model a server lists at ``/v1/models``.

    Raises:
        ConfigError: the server cannot be reached or lists no model.
    """
    url = f"{base_url}/v1/models"
    shown = redact_url(url)
    try:
        async with session.get(
            url, headers=headers(api_key), timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as resp:
            if resp.status != 200:
                raise ConfigError(f"GET {shown} answered HTTP {resp.status}; pass --model NAME")
            data = await _models_json(resp)
    except (aiohttp.ClientError, TimeoutError) as e:
        raise ConfigError(
            f"cannot reach {shown} ({type(e).__name__}: {e}); check --url "
            "and that the server is running"
        ) from e
    except (ValueError, RecursionError) as e:
        raise ConfigError(
            f"{shown} did not answer a model list ({type(e).__name__}); pass --model NAME"
        ) from e
    models = data.get("data") if isinstance(data, dict) else None
    if not models or not isinstance(models[0], dict) or "id" not in models[0]:
        raise ConfigError(f"{shown} lists no model; pass --model NAME")
    return str(models[0]["id"])


async def model_context(
    session: aiohttp.ClientSession,
    base_url: str,
    api_key: str | None,
    model: str,
    timeout_s: float = 10.0,
) -> int | None:
    """The context length (``max_model_len``) ``/v1/models`` lists for ``model``, as vLLM and
    the emulated engine do; None when the server lists none or cannot be asked."""
    try:
        async with session.get(
            f"{base_url}/v1/models",
            headers=headers(api_key),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        ) as resp:
            data = await _models_json(resp) if resp.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, ValueError, RecursionError):
        return None
    models = data.get("data") if isinstance(data, dict) else None
    for m in models if isinstance(models, list) else ():
        if isinstance(m, dict) and m.get("id") == model:
            n = m.get("max_model_len")
            return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None
    return None


_PARSE_BATCH = 16  # events parsed per event-loop turn once a stream has ended


class _Stream:
    """Mutable per-request state while a response streams in.

    Events are kept with their stamps as they arrive and parsed once the stream has ended
    (:meth:`parse`, a few at a time between which the reader yields): while chunks of many
    streams arrive together, the event loop then gets back to reading the other sockets
    sooner, so their reads are stamped sooner.
    """

    __slots__ = (
        "counter",
        "done_s",
        "error",
        "estimates",
        "explicit",
        "finish",
        "gap_counts",
        "last_s",
        "max_timed",
        "num_untimed",
        "received",
        "times",
        "untimed_tokens",
        "usage",
    )

    def __init__(
        self, counter: Callable[[str], int], max_timed: int = DEFAULT_MAX_TIMED_CHUNKS
    ) -> None:
        self.counter = counter
        self.max_timed = max_timed
        self.num_untimed = 0
        self.untimed_tokens = 0
        self.gap_counts = [0] * (len(UNTIMED_GAP_BOUNDS_S) + 1)
        self.last_s: float | None = None
        self.received: list[tuple[str, float]] = []
        self.times: list[float] = []
        self.estimates: list[int] = []
        self.explicit = True
        self.usage: dict[str, Any] | None = None
        self.done_s: float | None = None
        self.finish: str | None = None
        self.error: tuple[ErrorKind, str] | None = None

    def event(self, payload: str, t: float) -> None:
        if payload.strip() == DONE:
            self.done_s = t
        elif len(self.received) + len(self.times) < self.max_timed:
            self.received.append((payload, t))
        else:
            self._untimed(payload, t)
        self.last_s = t

    def _untimed(self, payload: str, t: float) -> None:
        """A chunk past the bound: parsed now, counted, its time kept only as a gap."""
        if self.error is not None:
            return
        try:
            chunk = self._read(payload)
        except ProtocolError as e:
            self.error = (ErrorKind.PROTOCOL, str(e)[:300])
            return
        if chunk is None:
            return
        self.num_untimed += 1
        self.untimed_tokens += self._tokens(chunk)
        if self.last_s is not None:
            self.gap_counts[untimed_gap_bucket(t - self.last_s)] += 1

    def parse(self, limit: int | None = None) -> bool:
        """Read the oldest ``limit`` kept events (all by default); True if some remain.

        Raises:
            ProtocolError: an event is not the JSON an OpenAI-compatible server sends.
        """
        batch = self.received[:limit]
        del self.received[:limit]
        for payload, t in batch:
            self._parse_event(payload, t)
        return bool(self.received)

    def _parse_event(self, payload: str, t: float) -> None:
        chunk = self._read(payload)
        if chunk is not None:
            self.times.append(t)
            self.estimates.append(self._tokens(chunk))

    def _read(self, payload: str) -> Chunk | None:
        """The chunk, its usage and finish noted; None for an in-stream error (noted)."""
        chunk = parse_chunk(payload)
        if chunk.error is not None:
            code = chunk.error_code or 500
            kind = ErrorKind.HTTP_4XX if 400 <= code < 500 else ErrorKind.HTTP_5XX
            self.error = (kind, f"in-stream error: {chunk.error}"[:300])
            return None
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.finish_reason:
            self.finish = chunk.finish_reason
        return chunk

    def _tokens(self, chunk: Chunk) -> int:
        if chunk.num_tokens is not None:
            return chunk.num_tokens
        self.explicit = self.explicit and not chunk.text
        return max(1, self.counter(chunk.text)) if chunk.text else 0


class _ReadClock(asyncio.Protocol):
    """Sits between a connection's transport and aiohttp's protocol and notes each read.

    Installed with :meth:`asyncio.Transport.set_protocol` and left there for the connection's
    life (a pooled connection carries one request at a time), so every read of the responses
    it carries is stamped before aiohttp parses it.
    """

    __slots__ = ("_inner", "last_read_s")

    def __init__(self, inner: asyncio.BaseProtocol) -> None:
        self._inner = inner
        self.last_read_s: float | None = None

    def data_received(self, data: bytes) -> None:
        self.last_read_s = time.perf_counter()
        self._inner.data_received(data)  # type: ignore[attr-defined]

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()  # type: ignore[attr-defined, no-any-return]

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class _SendClock:
    """Per request: when aiohttp handed its first body bytes (and headers) to the socket."""

    __slots__ = ("sent_s",)

    def __init__(self) -> None:
        self.sent_s: float | None = None


async def _on_request_chunk_sent(
    _: aiohttp.ClientSession, ctx: Any, __: aiohttp.TraceRequestChunkSentParams
) -> None:
    # aiohttp awaits this immediately before writing the chunk (with the buffered headers).
    clock = ctx.trace_request_ctx
    if isinstance(clock, _SendClock) and clock.sent_s is None:
        clock.sent_s = time.perf_counter()


def timing_trace_config() -> aiohttp.TraceConfig:
    """Pass in ``ClientSession(trace_configs=[...])`` so that :func:`send_request` stamps a
    request's send time as its bytes are written."""
    config = aiohttp.TraceConfig()
    config.on_request_chunk_sent.append(_on_request_chunk_sent)
    config.freeze()
    return config


def _read_clock(resp: aiohttp.ClientResponse) -> _ReadClock | None:
    """The clock on the response's connection, installed now if it has none yet."""
    transport = resp.connection.transport if resp.connection is not None else None
    if transport is None:
        return None
    protocol = transport.get_protocol()
    if isinstance(protocol, _ReadClock):
        return protocol
    clock = _ReadClock(protocol)
    transport.set_protocol(clock)
    return clock


async def send_request(
    session: aiohttp.ClientSession,
    options: ClientOptions,
    request_id: str,
    prompt: Prompt,
    *,
    scheduled_s: float | None = None,
    counter: Callable[[str], int] = count_tokens,
) -> ClientResult:
    """Send one request and time it; never raises: every failure becomes the record's error.

    ``options.timeout_s`` bounds the whole request: connecting, waiting, streaming and
    reading the chunks.
    """
    url = options.base_url + options.endpoint.path
    hdrs = headers(options.api_key)
    hdrs["X-Request-Id"] = request_id
    data = json.dumps(request_body(options, prompt)).encode()
    state = _Stream(counter, options.max_timed_chunks)
    status: int | None = None
    end_s: float | None = None
    timeout = aiohttp.ClientTimeout(total=options.timeout_s)
    clock = _SendClock()
    asked_s = time.perf_counter()
    try:
        async with (
            asyncio.timeout(options.timeout_s),
            session.post(
                url, data=data, headers=hdrs, timeout=timeout, trace_request_ctx=clock
            ) as resp,
        ):
            status = resp.status
            if status >= 400:
                body = (await resp.read())[:300].decode("utf-8", errors="replace")
                kind = ErrorKind.HTTP_4XX if status < 500 else ErrorKind.HTTP_5XX
                state.error = (kind, f"HTTP {status}: {body}")
                end_s = time.perf_counter()
            elif options.stream:
                end_s = await _read_stream(resp, state, clock.sent_s or asked_s)
            else:
                end_s = await _read_whole(resp, state)
    except (TimeoutError, aiohttp.ServerTimeoutError) as e:
        state.error = (
            ErrorKind.TIMEOUT,
            f"no complete response within {options.timeout_s:g} s" + (f" ({e})" if str(e) else ""),
        )
    except aiohttp.ClientConnectorError as e:
        state.error = (ErrorKind.CONNECT, str(e)[:300])
    except (
        aiohttp.ServerDisconnectedError,
        aiohttp.ClientPayloadError,
        aiohttp.ClientOSError,
        ConnectionError,
    ) as e:
        state.error = (ErrorKind.DISCONNECT, f"{type(e).__name__}: {e}"[:300])
    except (ProtocolError, aiohttp.ClientResponseError, UnicodeDecodeError) as e:
        state.error = (ErrorKind.PROTOCOL, str(e)[:300])
    except aiohttp.ClientError as e:
        state.error = (ErrorKind.DISCONNECT, f"{type(e).__name__}: {e}"[:300])
    except Exception as e:
        # Whatever a hostile reply makes the HTTP stack raise, the request was sent: it must
        # end as a record, never vanish from the run.
        state.error = (ErrorKind.PROTOCOL, f"unusable reply ({type(e).__name__}: {e})"[:300])
    try:
        state.parse()  # a stream cut short: the chunks that came before still count
    except ProtocolError as e:
        state.error = state.error or (ErrorKind.PROTOCOL, str(e)[:300])
    send_s = clock.sent_s if clock.sent_s is not None else asked_s
    return _finish(request_id, prompt, send_s, end_s, status, state, scheduled_s)


async def _read_stream(resp: aiohttp.ClientResponse, state: _Stream, send_s: float) -> float | None:
    decoder = SSEDecoder()
    content = resp.content
    clock = _read_clock(resp)
    while True:
        data = await content.readany()
        t = time.perf_counter()
        # The read that completed ``data`` is the connection's latest; one before the send
        # belongs to an earlier request (a new connection's first bytes reach aiohttp before
        # the clock is installed), and then the return of readany is the best stamp.
        if clock is not None and clock.last_read_s is not None and clock.last_read_s >= send_s:
            t = clock.last_read_s
        if not data:
            break
        for payload in decoder.feed(data):
            state.event(payload, t)
    eof_s = time.perf_counter()
    for payload in decoder.close():
        state.event(payload, eof_s)
    while state.parse(_PARSE_BATCH):
        await asyncio.sleep(0)  # let other streams' reads in between
    if state.error is not None:
        return None
    if state.done_s is None and state.finish is None:
        state.error = (ErrorKind.PROTOCOL, "stream ended without [DONE] or a finish_reason")
        return None
    return state.done_s if state.done_s is not None else eof_s


async def _read_whole(resp: aiohttp.ClientResponse, state: _Stream) -> float:
    raw = await resp.read()
    end_s = time.perf_counter()
    state.event(raw.decode("utf-8"), end_s)
    state.parse()
    return end_s


def _finish(
    request_id: str,
    prompt: Prompt,
    send_s: float,
    end_s: float | None,
    status: int | None,
    state: _Stream,
    scheduled_s: float | None,
) -> ClientResult:
    usage = state.usage or {}
    out_tokens = _int_or_none(usage.get("completion_tokens"))
    in_tokens = _int_or_none(usage.get("prompt_tokens"))
    client_count = sum(state.estimates)
    tokens = assign_chunk_tokens(state.estimates, state.explicit, out_tokens)
    first = next((t for t, n in zip(state.times, tokens, strict=True) if n > 0), None)
    error = state.error
    record = RequestRecord(
        request_id=request_id,
        send_s=send_s,
        first_token_s=first,
        end_s=end_s if error is None else None,
        chunk_times_s=tuple(state.times),
        chunk_tokens=tokens,
        input_tokens=in_tokens if in_tokens is not None else prompt.input_tokens,
        output_tokens=out_tokens,
        error=error[0].value if error else None,
        error_detail=error[1] if error else None,
        http_status=status,
        scheduled_s=scheduled_s,
        num_untimed_chunks=state.num_untimed,
        num_untimed_tokens=state.untimed_tokens,
        untimed_gap_counts=tuple(state.gap_counts) if state.num_untimed else (),
    )
    return ClientResult(record, client_count + state.untimed_tokens)


def _int_or_none(x: Any) -> int | None:
    try:
        return int(x) if x is not None else None
    except (TypeError, ValueError, OverflowError):
        return None


def assign_chunk_tokens(
    estimates: list[int], explicit: bool, usage_tokens: int | None
) -> tuple[int, ...]:
    """Tokens per chunk, consistent with the server's total where the text allows.

    Chunks that state their tokens (``token_ids``/logprobs) are taken as they are. Otherwise
    the client's per-chunk estimate is reconciled with ``usage.completion_tokens``: if the
    server sent one token per text chunk (vLLM's default) every text chunk counts 1;
    else the server's total is shared out in proportion to the estimates, each text chunk
    keeping at least one token. Without usage the estimates stand.
    """
    if explicit or usage_tokens is None or sum(estimates) == usage_tokens:
        return tuple(estimates)
    text_idx = [i for i, n in enumerate(estimates) if n > 0]
    if usage_tokens < len(text_idx):
        return tuple(estimates)
    out = [0] * len(estimates)
    for i in text_idx:
        out[i] = 1
    spare = usage_tokens - len(text_idx)
    weights = [estimates[i] - 1 for i in text_idx]
    total_w = sum(weights)
    if spare and total_w == 0:
        weights = [1] * len(text_idx)
        total_w = len(text_idx)
    if spare:
        shares = [spare * w / total_w for w in weights]
        floors = [int(s) for s in shares]
        order = sorted(range(len(shares)), key=lambda k: floors[k] - shares[k])
        for k in order[: spare - sum(floors)]:
            floors[k] += 1
        for i, extra in zip(text_idx, floors, strict=True):
            out[i] += extra
    return tuple(out)
