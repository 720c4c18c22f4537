"""The proxy under load in front of two emulated engines: at a steady 200 req/s every request
is answered, no healthy backend is ejected, and upstream connections are kept alive (far fewer
than requests); at a rate one engine alone serves, the proxy fails no request the engines
would have served, even with connects that time out."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _tools import SLOTUNE
from route_helpers import ConnectionCounter, Engine, engines, fleet_yaml, running_proxy

from slotune.collector.agent.promtext import PromTextParser
from slotune.tuner.fleet.route_breaker import BreakerState

NUM_REQUESTS = 1500


@pytest.fixture(scope="module")
def counted_engines() -> Iterator[tuple[list[Engine], list[ConnectionCounter]]]:
    with engines(2, speedup=50) as started:
        counters = [ConnectionCounter(e.url) for e in started]
        try:
            yield started, counters
        finally:
            for c in counters:
                c.close()


def _bench(url: str, rate: int, num_requests: int) -> dict[str, Any]:
    done = subprocess.run(
        [
            *(SLOTUNE, "bench", "--url", url, "--no-store", "--json"),
            *("--rate", str(rate), "--num-requests", str(num_requests)),
            *("--input-len", "16", "--output-len", "4", "--timeout", "120"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)["summary"]
    return summary


@pytest.mark.slow
def test_the_proxy_fails_no_request_that_the_engines_alone_serve(
    counted_engines: tuple[list[Engine], list[ConnectionCounter]],
) -> None:
    started, _ = counted_engines
    rate, num_requests = 400, 1200
    alone = _bench(started[0].url, rate, num_requests)
    # a connect limit far below what a loaded machine needs: connects time out under this
    # load, and a connect timeout must move a request, never fail it
    text = fleet_yaml([e.url for e in started], extra="timeouts: {connect: 50ms}\n")
    with running_proxy(text) as proxy:
        through = _bench(proxy.url, rate, num_requests)
        backends = proxy.proxy.backends.values()
        assert all(b.state() is BreakerState.CLOSED for b in backends)
    assert through["num_errors"] <= alone["num_errors"], (through, alone)
    assert through["num_completed"] >= alone["num_completed"]


@pytest.mark.slow
def test_200_requests_a_second_are_all_answered_on_kept_alive_connections(
    counted_engines: tuple[list[Engine], list[ConnectionCounter]],
) -> None:
    _, counters = counted_engines
    # generous limits: the load is the subject here, not the timeouts
    text = fleet_yaml(
        [c.url for c in counters], extra="timeouts: {connect: 30s, first_byte: 120s, idle: 60s}\n"
    )
    with running_proxy(text) as proxy:
        done = subprocess.run(
            [
                *(SLOTUNE, "bench", "--url", proxy.url, "--no-store", "--json"),
                *("--rate", "200", "--num-requests", str(NUM_REQUESTS)),
                *("--input-len", "16", "--output-len", "4", "--timeout", "120"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)["summary"]
        backends = proxy.proxy.backends.values()
        assert summary["num_errors"] == 0
        assert summary["num_completed"] == NUM_REQUESTS
        assert all(b.state() is BreakerState.CLOSED for b in backends)
        assert all(b.in_flight == 0 for b in backends)
        metrics = httpx.get(proxy.url + "/metrics", timeout=60).text
        assert "slotune_route_upstream_errors_total{" not in metrics
        routed = [
            s.value
            for fam in PromTextParser().parse(metrics, source="route").families
            for s in fam.samples
            if s.name == "slotune_route_decisions_total"
        ]
        assert sum(routed) == NUM_REQUESTS and len(routed) == 2 and min(routed) > 0
    # Without keep-alive every request opens its own connection. With it, a connection is
    # opened only when more requests are in flight at once than are pooled idle, which on a
    # loaded machine (slow answers, many in flight) can still be hundreds.
    num_connections = sum(c.num_accepted for c in counters)
    assert 0 < num_connections <= NUM_REQUESTS // 2, (num_connections, summary["e2e_ms"])
