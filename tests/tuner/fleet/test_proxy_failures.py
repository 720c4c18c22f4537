"""Backends that break: garbage, a hang, a kill mid-run. The proxy answers cleanly, ejects the
backend and keeps serving the others; every wait is bounded."""

from __future__ import annotations

import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from route_helpers import FakeBackend, engines, fleet_yaml, running_proxy, wait_until

from slotune.tuner.fleet.route_breaker import BreakerState


def _all_served_by_b1(client: httpx.Client, url: str, num_requests: int) -> None:
    for _ in range(num_requests):
        r = client.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 2})
        assert r.status_code == 200
        assert r.headers["X-Slotune-Backend"] == "b1"


def test_a_backend_that_answers_garbage_is_ejected_and_others_serve() -> None:
    bad = FakeBackend(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    try:
        with engines(1, speedup=20) as [good]:
            text = fleet_yaml(
                [bad.url, good.url], extra="circuit_breaker: {failures: 2, open_for: 60s}\n"
            )
            with running_proxy(text) as proxy, httpx.Client(timeout=30) as client:
                # a failure before the backend answered is retried on another backend
                _all_served_by_b1(client, proxy.url, 6)
                backends = proxy.proxy.backends
                assert wait_until(lambda: backends["b0"].state() is BreakerState.OPEN)
                assert backends["b1"].state() is BreakerState.CLOSED
                metrics = client.get(proxy.url + "/metrics").text
                assert (
                    'slotune_route_backend_up{backend="b0",model="llama-3.1-8b",pool="default"} 0.0'
                    in metrics
                )
    finally:
        bad.close()


def test_a_hung_backend_gets_504_and_is_ejected() -> None:
    hung = FakeBackend(None)
    try:
        text = fleet_yaml(
            [hung.url],
            extra="timeouts: {first_byte: 1s, idle: 1s}\ncircuit_breaker: {failures: 1, open_for: 60s}\n",
        )
        with running_proxy(text) as proxy, httpx.Client(timeout=30) as client:
            r = client.post(proxy.url + "/v1/completions", json={"prompt": "x", "stream": True})
            assert r.status_code == 504
            assert r.json()["error"]["message"] == "backend b0 did not answer in time"
            assert proxy.proxy.backends["b0"].state() is BreakerState.OPEN
            r = client.post(proxy.url + "/v1/completions", json={"prompt": "x"})
            assert r.status_code == 503
            assert 50 < int(r.headers["Retry-After"]) <= 60  # when the circuit lets a probe out
            assert client.get(proxy.url + "/health").status_code == 503
    finally:
        hung.close()


def _stream(url: str, answering: list[str]) -> tuple[str, list[str]]:
    body = {"prompt": "a long answer", "max_tokens": 6000, "stream": True}
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", url + "/v1/completions", json=body) as r,
    ):
        assert r.status_code == 200
        events = []
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
                if len(events) == 1:
                    answering.append(r.headers["X-Slotune-Backend"])
        return r.headers["X-Slotune-Backend"], events


@pytest.mark.slow
def test_a_backend_killed_mid_run() -> None:
    with (
        engines(2, speedup=10) as started,
        running_proxy(fleet_yaml([e.url for e in started])) as proxy,
        ThreadPoolExecutor(6) as pool,
    ):
        backends = proxy.proxy.backends
        answering: list[str] = []  # list.append is atomic: no lock needed
        streams = [pool.submit(_stream, proxy.url, answering) for _ in range(6)]
        # every stream has its first tokens (a request the backend had not answered yet would
        # be retried on the other one, which is right but not what this test is about)
        assert wait_until(lambda: len(answering) == 6)
        assert sorted(answering) == ["b0"] * 3 + ["b1"] * 3
        started[0].kill()
        results = [f.result(timeout=60) for f in streams]  # nothing hangs
        for backend, events in results:
            if backend == "b0":  # cut short: an error event ends the stream
                error = json.loads(events[-1])["error"]
                assert error["type"] == "BadGatewayError"
                assert "b0 stopped answering mid-stream" in error["message"]
            else:
                assert events[-1] == "[DONE]"
        assert sorted(b for b, _ in results) == ["b0"] * 3 + ["b1"] * 3
        assert wait_until(lambda: backends["b0"].state() is BreakerState.OPEN)
        with httpx.Client(timeout=30) as client:
            _all_served_by_b1(client, proxy.url, 5)
        assert backends["b0"].in_flight == 0


def test_a_backend_that_accepts_no_connection_is_retried_elsewhere() -> None:
    # a listener that never accepts, its backlog already full: connecting times out
    with socket.socket() as full, socket.socket() as filler:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        filler.connect(full.getsockname())
        url = f"http://127.0.0.1:{full.getsockname()[1]}"
        with engines(1, speedup=20) as [good]:
            text = fleet_yaml([url, good.url], extra="timeouts: {connect: 300ms}\n")
            with running_proxy(text) as proxy, httpx.Client(timeout=30) as client:
                b0 = proxy.proxy.backends["b0"]
                verdicts: list[bool | None] = []
                on_end = b0.on_end

                def record(sent_after_read: int, *, ok: bool | None) -> None:
                    verdicts.append(ok)
                    on_end(sent_after_read, ok=ok)

                b0.on_end = record  # type: ignore[method-assign]
                _all_served_by_b1(client, proxy.url, 3)
                # slow to accept is not dead: none of the three counts against the circuit
                assert verdicts == [None, None, None]
                metrics = client.get(proxy.url + "/metrics").text
                assert (
                    'slotune_route_upstream_errors_total{backend="b0",kind="connect_timeout"}'
                    in metrics
                )


def test_a_connect_timeout_on_the_last_backend_waits_instead_of_failing() -> None:
    # the only backend's accept queue is full for a while (a busy engine, or a proxy starved
    # of CPU when its connect timer fires): slow is not dead, so the request waits for it
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n\r\n{}"
    )
    with socket.socket() as busy, socket.socket() as filler:
        busy.bind(("127.0.0.1", 0))
        busy.listen(0)
        filler.connect(busy.getsockname())
        url = f"http://127.0.0.1:{busy.getsockname()[1]}"
        freed = threading.Event()

        def free_then_answer() -> None:
            freed.wait(60)
            filler.close()
            busy.settimeout(30)
            # the filler and any of the proxy's /metrics scrapes (closed unanswered), then
            # the request; bounded in count and by the accept timeout
            for _ in range(50):
                conn, _ = busy.accept()
                with conn:
                    if conn.recv(65536).startswith(b"POST"):
                        conn.sendall(reply)
                        return

        text = fleet_yaml(
            [url], extra="timeouts: {connect: 200ms}\ncircuit_breaker: {failures: 1000000}\n"
        )
        with (
            running_proxy(text) as proxy,
            httpx.Client(timeout=60) as client,
            ThreadPoolExecutor(1) as pool,
        ):
            answering = pool.submit(free_then_answer)
            threading.Timer(1.0, freed.set).start()  # well past the 200 ms connect limit
            r = client.post(proxy.url + "/v1/completions", json={"prompt": "x"})
            answering.result(timeout=60)
            assert r.status_code == 200
            assert proxy.proxy.backends["b0"].state() is BreakerState.CLOSED
