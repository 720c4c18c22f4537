"""``slotune route``: an OpenAI-compatible reverse proxy that routes each request by policy.

Per request: the body is read once, its routing features (model, estimated prompt tokens,
``max_tokens`` or the expected output length, session and client keys, prefix block ids) go
to the policy with the live load of every backend that serves the model and whose circuit
lets requests through, and the body is forwarded byte for byte to the chosen backend. The
answer comes back as the backend sends it: every chunk of a stream is written to the client
as soon as it arrives (no buffering, compression passed through).

Upstream connections are pooled and kept alive (aiohttp's connector): a connection whose
answer was read to its end serves the next request, so a busy proxy opens few connections and
an engine's accept queue never fills with them. An idle pooled connection is dropped after
``_UPSTREAM_KEEPALIVE_S``, below the 5 s after which vLLM's server (uvicorn) closes idle ones,
so the proxy does not send on a connection the engine is closing. Only the client's own
headers go upstream: none named in its ``Connection`` header, no hop-by-hop header, and none
that aiohttp would add on its own (``Accept-Encoding``, ``User-Agent``, ``Content-Type``).

Failures:

- before the backend answered (refused connection, reset, garbage instead of HTTP): the
  backend's failure is counted and the request goes to another backend, once per backend;
  when none is left the client gets 502 with an OpenAI error body. Generation has no side
  effects, so a retry costs only the work a dead backend may already have done.
- no connection within ``timeouts.connect``: the request goes to another backend too, but
  it is not counted against the circuit, and the last backend it can go to gets no connect
  limit (only ``timeouts.first_byte``), so a connect timeout alone never ends in 502. Under
  load a connect can wait on a busy engine's accept queue, or the timer can fire while this
  process was starved of CPU (a connect that the kernel completed at once then reads as
  timed out): that is a slow engine or a slow proxy, not a dead engine, and ejecting it, or
  failing the request, would turn load into an outage. A host that stopped answering fails
  its ``/metrics`` reads as well, and those eject it.
- no response head within ``timeouts.first_byte`` (or, streaming, no bytes for
  ``timeouts.idle``): 504, counted, not retried (a hung backend would only make the client
  wait twice);
- a stream cut short (backend killed mid-answer): the client gets an SSE ``error`` event
  and the end of the stream, never a hang;
- the client goes away: its handler is cancelled, which closes the upstream connection, so
  the engine aborts the request (vLLM and the emulated engine do on disconnect).

Clients: a body that is not a JSON object, nested too deep to decode, or whose routing
fields are out of range gets 400 with the reason; a client that does not send its request
head (or its body) within ``timeouts.client`` is disconnected (or gets 408), so slow-sending
connections cannot pile up.

Sheds: the policy's shed (and ``shedding.max_in_flight``) answer 429 with ``Retry-After``;
a model whose every backend is ejected answers 503 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Mapping

import aiohttp
from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from multidict import CIMultiDict

from slotune.tuner.fleet.estimator import OutputLengthEstimator
from slotune.tuner.fleet.policy import RequestInfo, RoutingPolicy
from slotune.tuner.fleet.route_backend import Backend, QueuedPrompt, poll_forever
from slotune.tuner.fleet.route_config import RouteConfig
from slotune.tuner.fleet.route_metrics import CONTENT_TYPE, RouteMetrics
from slotune.tuner.fleet.route_request import BadRequest, check_text, request_info

log = logging.getLogger("slotune.route")

BACKEND_HEADER = "X-Slotune-Backend"
_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "Content-Length",
    )
)
# headers aiohttp adds to a request unless told not to: the engine sees only the client's
_SKIP_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
_UPSTREAM_KEEPALIVE_S = 4.0
_USAGE_RE = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')
_MAX_BODY_BYTES = 64 * 1024 * 1024
_MIN_POLL_TIMEOUT_S = 5.0


def error_body(status: int, err_type: str, message: str) -> bytes:
    """An OpenAI error envelope, as vLLM writes it."""
    return json.dumps(
        {"error": {"message": message, "type": err_type, "param": None, "code": status}}
    ).encode()


def _error(status: int, err_type: str, message: str, retry_after_s: float = 0.0) -> web.Response:
    headers = {"Retry-After": str(max(1, math.ceil(retry_after_s)))} if retry_after_s else None
    return web.Response(
        status=status,
        body=error_body(status, err_type, message),
        content_type="application/json",
        headers=headers,
    )


def _forward_headers(headers: Mapping[str, str]) -> CIMultiDict[str]:
    """The end-to-end headers: without hop-by-hop ones and those named in ``Connection``."""
    named = {
        token.strip().lower()
        for k, v in headers.items()
        if k.lower() == "connection"
        for token in v.split(",")
    }
    return CIMultiDict(
        (k, v)
        for k, v in headers.items()
        if k.lower() not in _HOP_BY_HOP and k.lower() not in named
    )


def _refuse(request: web.Request, status: int, err_type: str, message: str) -> web.Response:
    """A client error: the answer, and one WARNING line with the reason (never a traceback)."""
    log.warning(
        "%s %s from %s: %d %s", request.method, request.path, request.remote, status, message
    )
    return _error(status, err_type, message)


class _Retry(Exception):
    """The backend failed before answering: the request may go to another one."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RouteProxy:
    """The proxy's state: backends, policy, metrics; :meth:`make_app` gives the aiohttp app.

    Args:
        config: the validated fleet configuration.
        policy: the routing policy (default: a fresh one built from the configuration).
    """

    def __init__(self, config: RouteConfig, policy: RoutingPolicy | None = None) -> None:
        self.config = config
        self.policy = policy if policy is not None else config.make_policy()
        self.backends = {s.name: Backend(s, config.breaker) for s in config.backends}
        self._by_model: dict[str, list[Backend]] = {}
        for b in self.backends.values():
            self._by_model.setdefault(b.spec.model, []).append(b)
        self.metrics = RouteMetrics(self.backends.values())
        self.estimator = OutputLengthEstimator()
        self.in_flight = 0
        self._ids = itertools.count(1)
        self._session: aiohttp.ClientSession | None = None

    def make_app(self) -> web.Application:
        """The aiohttp application; its startup opens the upstream pool and the load pollers."""
        app = web.Application(client_max_size=_MAX_BODY_BYTES)
        app.router.add_post("/v1/completions", self._generate)
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.cleanup_ctx.append(self._lifecycle)
        return app

    async def _lifecycle(self, app: web.Application) -> AsyncIterator[None]:
        timeouts = self.config.timeouts
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=_UPSTREAM_KEEPALIVE_S),
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=False,
            skip_auto_headers=_SKIP_AUTO_HEADERS,
        )
        interval = self.config.poll_interval_s
        # generous: a busy engine serves /metrics late, and a late read must not eject it
        # (a dead one refuses at once; a hung one is caught by the requests' own timeouts)
        read_limit_s = max(_MIN_POLL_TIMEOUT_S, 4 * interval, timeouts.connect_s)
        pollers = [
            asyncio.create_task(poll_forever(b, interval, read_limit_s))
            for b in self.backends.values()
        ]
        try:
            yield
        finally:
            for task in pollers:
                task.cancel()
            await asyncio.gather(*pollers, return_exceptions=True)
            await self._session.close()

    async def _models(self, request: web.Request) -> web.Response:
        created = int(time.time())
        data = [
            {"id": m, "object": "model", "created": created, "owned_by": "slotune-route"}
            for m in self.config.models
        ]
        return web.json_response({"object": "list", "data": data})

    async def _health(self, request: web.Request) -> web.Response:
        if any(b.can_send() for b in self.backends.values()):
            return web.Response(text="")
        return _error(503, "ServiceUnavailableError", "every backend's circuit is open")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        received = time.perf_counter()
        client_s = self.config.timeouts.client_s
        try:
            async with asyncio.timeout(client_s):
                raw = await request.read()
        except RequestPayloadError as e:  # a body that its framing or encoding breaks
            return _refuse(
                request,
                400,
                "BadRequestError",
                "The request body is malformed: " + " ".join(str(e).split()),
            )
        except TimeoutError:
            return _refuse(
                request,
                408,
                "RequestTimeoutError",
                f"the request body did not arrive within {client_s:g} s",
            )
        try:
            body = json.loads(raw)
        except RecursionError:
            return _refuse(
                request, 400, "BadRequestError", "The request body is nested too deeply."
            )
        except ValueError as e:  # UnicodeDecodeError and too-long integers included
            return _refuse(
                request, 400, "BadRequestError", f"The request body is not valid JSON: {e}"
            )
        if not isinstance(body, dict):
            return _refuse(
                request, 400, "BadRequestError", "The request body must be a JSON object."
            )
        limit = self.config.shedding.max_in_flight
        if limit and self.in_flight >= limit:
            return self._shed(
                429, "max_in_flight", f"{limit} requests in flight (shedding.max_in_flight)"
            )
        try:
            check_text(raw, body)
            info = request_info(
                f"route-{next(self._ids)}",
                body,
                request.headers,
                default_model=self.config.models[0],
                block_size=self.config.block_size,
                estimator=self.estimator,
            )
        except BadRequest as e:
            return _refuse(request, 400, "BadRequestError", str(e))
        serving = self._by_model.get(info.model)
        if serving is None:
            return _error(404, "NotFoundError", f"The model `{info.model}` does not exist.")
        tried: list[str] = []
        self.in_flight += 1
        try:
            while True:
                candidates = [
                    b.replica_state() for b in serving if b.spec.name not in tried and b.can_send()
                ]
                if not candidates:
                    if tried:
                        names = ", ".join(tried)
                        return _error(502, "BadGatewayError", f"no backend answered ({names})")
                    now = time.monotonic()
                    return self._shed(
                        503,
                        "no_backend",
                        f"every backend of {info.model} is down",
                        min(b.breaker.seconds_until_probe(now) for b in serving),
                    )
                decision = self.policy.choose(info, candidates)
                if decision.replica is None:
                    return self._shed(429, "policy", decision.shed_reason, decision.retry_after_s)
                backend = self.backends[decision.replica]
                can_move_on = len(candidates) > 1
                if not tried:
                    self.metrics.overhead.observe(time.perf_counter() - received)
                self.metrics.decisions.labels(
                    self.policy.name, backend.spec.pool, backend.spec.name
                ).inc()
                try:
                    return await self._forward(
                        request, backend, raw, info, bool(body.get("stream")), can_move_on
                    )
                except _Retry as e:
                    log.warning("backend %s: %s; trying another", backend.spec.name, e.message)
                    tried.append(backend.spec.name)
        finally:
            self.in_flight -= 1

    def _shed(
        self, status: int, reason: str, message: str, retry_after_s: float = 0.0
    ) -> web.Response:
        self.metrics.shed.labels(self.policy.name, reason).inc()
        retry = retry_after_s or self.config.shedding.retry_after_s
        err_type = "RateLimitError" if status == 429 else "ServiceUnavailableError"
        return _error(status, err_type, f"shed: {message}", retry)

    async def _forward(
        self,
        request: web.Request,
        backend: Backend,
        raw: bytes,
        info: RequestInfo,
        stream: bool,
        can_move_on: bool,
    ) -> web.StreamResponse:
        """Send the request to ``backend`` and relay its answer.

        ``can_move_on``: another backend could take the request, so a connect slower than
        ``timeouts.connect`` gives up here; the last one has until ``timeouts.first_byte``.
        """
        assert self._session is not None, "the app's startup opens the session"
        timeouts = self.config.timeouts
        name = backend.spec.name
        # streaming: the gap between chunks is bounded; else the whole answer is one read
        read_timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=timeouts.connect_s if can_move_on else None,
            sock_read=timeouts.idle_s if stream else timeouts.first_byte_s,
        )
        ok: bool | None = None  # None: the client left, which says nothing about the backend
        sent_after_read = backend.on_send()
        # a non-streamed answer's first byte comes at its end: only streams tell when prefill ended
        queued = backend.queue_prompt(info.input_tokens if stream else 0)
        try:
            try:
                async with asyncio.timeout(timeouts.first_byte_s):
                    upstream = await self._session.post(
                        backend.spec.url + request.path,
                        data=raw,
                        headers=_forward_headers(request.headers),
                        timeout=read_timeout,
                    )
            except aiohttp.ConnectionTimeoutError:
                # not connected, so nothing was sent: another backend may take it. Not a
                # failure (ok stays None): a busy engine accepts late, a dead one refuses.
                self.metrics.upstream_errors.labels(name, "connect_timeout").inc()
                raise _Retry(f"no connection within {timeouts.connect_s:g} s") from None
            except TimeoutError:
                ok = False
                self.metrics.upstream_errors.labels(name, "timeout").inc()
                return _error(504, "GatewayTimeoutError", f"backend {name} did not answer in time")
            except aiohttp.ClientError as e:
                ok = False
                kind = "connect" if isinstance(e, aiohttp.ClientConnectorError) else "protocol"
                self.metrics.upstream_errors.labels(name, kind).inc()
                raise _Retry(f"{type(e).__name__}: {e}") from None
            ended = False
            try:
                response, ok, ended = await self._relay(request, upstream, name, info, queued)
            finally:
                if ended:
                    upstream.release()  # read to its end: the connection goes back to the pool
                else:
                    # cut short: closing is how an engine learns that its client (here, the
                    # proxy) went away, and it aborts the request
                    upstream.close()
            return response
        finally:
            queued.release()
            backend.on_end(sent_after_read, ok=ok)

    async def _relay(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        name: str,
        info: RequestInfo,
        queued: QueuedPrompt,
    ) -> tuple[web.StreamResponse, bool | None, bool]:
        """Write the backend's answer to the client chunk by chunk.

        Returns:
            The response; ok (None if the client left); whether the answer was read to its end.
        """
        headers = _forward_headers(upstream.headers)
        headers[BACKEND_HEADER] = name
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason, headers=headers
        )
        is_sse = upstream.content_type == "text/event-stream"
        failure = ""
        num_events = 0
        prev = last = b""
        try:
            await response.prepare(request)
            while True:
                try:
                    chunk = await upstream.content.readany()
                except TimeoutError:
                    failure = "timeout"
                    break
                except aiohttp.ClientError:
                    failure = "stream"
                    break
                if not chunk:
                    break
                queued.release()  # the first token is out: the prompt no longer waits
                await response.write(chunk)
                prev, last = last, chunk
                num_events += chunk.count(b"data: ")
            if failure:
                self.metrics.upstream_errors.labels(name, failure).inc()
                if is_sse:
                    message = f"backend {name} stopped answering mid-stream ({failure})"
                    await response.write(
                        b"data: " + error_body(502, "BadGatewayError", message) + b"\n\n"
                    )
            elif upstream.status == 200:
                self._learn(info, name, prev[-1024:] + last, num_events if is_sse else 0)
            await response.write_eof()
        except ConnectionResetError:  # the client went away while we wrote
            return response, None, False
        if upstream.status >= 500:
            self.metrics.upstream_errors.labels(name, "status").inc()
        return response, upstream.status < 500 and not failure, not failure

    def _learn(self, info: RequestInfo, name: str, tail: bytes, num_events: int) -> None:
        """Tell the policy and the output-length estimator how long the answer was.

        The server's ``usage`` when the answer carries it; else, streaming, one token per
        SSE event (engines send about one token per chunk), less the ``[DONE]`` event.
        """
        found = _USAGE_RE.findall(tail)
        tokens = int(found[-1]) if found else max(num_events - 1, 0)
        if tokens <= 0:
            return
        self.estimator.observe(info.model, info.client_key, tokens)
        self.policy.on_finish(info, name, tokens)
