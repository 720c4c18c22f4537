"""Hostile clients: bodies the proxy cannot route get 400 with the reason and one WARNING line
(never a traceback), slow senders are cut off, and only the client's own end-to-end headers
travel, in both directions."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import httpx
import pytest
from route_helpers import FakeBackend, fleet_yaml, running_proxy

_REPLY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
    b"Connection: close, X-Backend-Hop\r\nX-Backend-Hop: 1\r\nX-Backend-End: 2\r\n\r\n{}"
)


# the fake answers its /metrics reads with the same reply, which the vLLM source refuses:
# keep the backend in (polls are not under test here)
_NEVER_EJECT = "circuit_breaker: {failures: 1000000}\n"


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    fake = FakeBackend(_REPLY)
    try:
        yield fake
    finally:
        fake.close()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b'{"prompt": [18446744073709551616]}',
            "field 'prompt': token id 18446744073709551616 is out of range",
        ),
        (
            b'{"prompt": "x", "max_tokens": 1' + b"0" * 400 + b"}",
            "field 'max_tokens': a 401-digit number is too large",
        ),
        (
            b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "The request body is nested too deeply.",
        ),
        (b'{"prompt": "x", "max_tokens": ' + b"9" * 5000 + b"}", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        # valid JSON, but no UTF-8 encodes a lone surrogate: refused before anything re-encodes
        (b'{"prompt": "a\\ud800"}', "field 'prompt': lone surrogate \\ud800 is not Unicode"),
        (
            b'{"messages": [{"role": "user", "content": "\\udfff"}]}',
            "field 'messages[0].content': lone surrogate",
        ),
    ],
)
def test_bodies_it_cannot_route_get_400_with_the_reason(
    backend: FakeBackend, body: bytes, message: str
) -> None:
    text = fleet_yaml([backend.url], extra=_NEVER_EJECT)
    with running_proxy(text) as proxy, httpx.Client(timeout=60) as client:
        r = client.post(proxy.url + "/v1/completions", content=body)
        assert r.status_code == 400
        error = r.json()["error"]
        assert error["type"] == "BadRequestError"
        assert message in error["message"]
        # the proxy still serves
        assert client.post(proxy.url + "/v1/completions", json={"prompt": "x"}).status_code == 200


def test_only_end_to_end_headers_are_forwarded_both_ways(backend: FakeBackend) -> None:
    text = fleet_yaml([backend.url], extra=_NEVER_EJECT)
    with running_proxy(text) as proxy, httpx.Client(timeout=60) as client:
        for name in ("Accept-Encoding", "User-Agent"):
            del client.headers[name]  # httpx's own defaults: this client sends neither
        r = client.post(
            proxy.url + "/v1/completions",
            content=b'{"prompt": "x"}',
            headers={
                "Content-Type": "application/json",
                "Connection": "keep-alive, X-Client-Hop",
                "X-Client-Hop": "secret",
                "Keep-Alive": "timeout=5",
                "X-Client-End": "kept",
            },
        )
        assert r.status_code == 200
        assert r.headers["X-Backend-End"] == "2"
        assert "X-Backend-Hop" not in r.headers
    [sent] = [b for b in backend.received if b.startswith(b"POST")]
    head = sent.split(b"\r\n\r\n")[0].lower()
    assert b"x-client-end: kept" in head
    assert b"content-type: application/json" in head
    for absent in (b"x-client-hop", b"keep-alive:", b"accept-encoding", b"user-agent"):
        assert absent not in head


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.settimeout(60)  # generous: the proxy's own timeout is the one under test
    return sock


def test_a_client_that_does_not_finish_its_request_is_cut_off(backend: FakeBackend) -> None:
    text = fleet_yaml([backend.url], extra=_NEVER_EJECT + "timeouts: {client: 1s}\n")
    with running_proxy(text) as proxy:
        with _connect(proxy.port) as slow_head:
            slow_head.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n")
            assert slow_head.recv(65536) == b""  # closed without an answer
        with _connect(proxy.port) as slow_body:
            slow_body.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
            )
            answer = slow_body.recv(65536)
            assert answer.startswith(b"HTTP/1.1 408 ")
            assert b"did not arrive within 1 s" in answer


def test_upstream_gets_only_the_headers_the_client_sent(backend: FakeBackend) -> None:
    text = fleet_yaml([backend.url], extra=_NEVER_EJECT)
    with running_proxy(text) as proxy, _connect(proxy.port) as client:
        client.sendall(
            b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 15\r\n\r\n{"prompt": "x"}'
        )
        assert client.recv(65536).startswith(b"HTTP/1.1 200 ")
    [sent] = [b for b in backend.received if b.startswith(b"POST")]
    lines = sent.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]
    # Host names the backend (as a proxy must); no Accept, User-Agent, Content-Type of its own
    assert sorted(line.split(b":")[0].lower() for line in lines) == [b"content-length", b"host"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
            "Content-Length",
        ),
        (b"POST /v1/completions HTTP/9.9\r\nHost: x\r\n\r\n", "Invalid HTTP version"),
        (b"POST /v1/completions HTTP/1.1\r\nBad Header\r\n\r\n", "Invalid header token"),
        (
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
            b"Content-Encoding: gzip\r\n\r\n{}",
            "content-encoding: gzip",
        ),
        (
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 21\r\n\r\n"
            b'{"prompt": "a\\ud800"}',
            "lone surrogate",
        ),
    ],
)
def test_a_malformed_request_is_one_warning_line_without_a_traceback(
    backend: FakeBackend, caplog: pytest.LogCaptureFixture, raw: bytes, reason: str
) -> None:
    text = fleet_yaml([backend.url], extra=_NEVER_EJECT)
    with (
        caplog.at_level(logging.WARNING),
        running_proxy(text) as proxy,
        _connect(proxy.port) as client,
    ):
        client.sendall(raw)
        assert client.recv(65536).startswith((b"HTTP/1.0 400 ", b"HTTP/1.1 400 "))
    served = [r for r in caplog.records if r.name in ("aiohttp.server", "slotune.route")]
    malformed = [r for r in served if "from 127.0.0.1" in r.getMessage()]
    assert len(malformed) == 1, [r.getMessage() for r in served]
    [record] = malformed
    assert record.levelno == logging.WARNING
    assert reason in record.getMessage() and "\n" not in record.getMessage()
    assert not any(r.exc_info for r in served)
