"""``slotune route`` end to end in front of real emulated engines on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from _tools import SLOTUNE
from route_helpers import MODEL, Engine, engines, fleet_yaml, running_proxy, wait_until

from slotune.collector.agent.promtext import PromTextParser
from slotune.collector.agent.vllm import VllmSource
from slotune.collector.store import latest_value, open_store
from slotune.tuner.fleet.policy import Decision, ReplicaState, RequestInfo


@pytest.fixture(scope="module")
def two_engines() -> Iterator[list[Engine]]:
    with engines(2, speedup=20) as started:
        yield started


def _stream(client: httpx.Client, url: str, body: dict[str, object]) -> tuple[str, list[str]]:
    with client.stream("POST", url + "/v1/completions", json=body) as r:
        assert r.status_code == 200, r.read()
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        return r.headers["X-Slotune-Backend"], events


def _metric(text: str, name: str, **labels: str) -> float:
    families = PromTextParser().parse(text, source="proxy").families
    total = 0.0
    for fam in families:
        for s in fam.samples:
            if s.name == name and all(s.label(k) == v for k, v in labels.items()):
                total += s.value
    return total


def test_streams_pass_through_and_are_spread(two_engines: list[Engine]) -> None:
    with (
        running_proxy(fleet_yaml([e.url for e in two_engines])) as proxy,
        httpx.Client(timeout=30) as client,
    ):
        seen = set()
        for i in range(4):
            body = {
                "model": MODEL,
                "prompt": f"request {i} " + "context " * 50,
                "max_tokens": 20,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            backend, events = _stream(client, proxy.url, body)
            seen.add(backend)
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            assert sum(1 for c in chunks if c["choices"]) == 20
            assert chunks[-1]["usage"]["completion_tokens"] == 20
        assert seen == {"b0", "b1"}  # least-requests rotates among idle replicas

        chat = client.post(
            proxy.url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
        )
        assert chat.status_code == 200
        assert chat.json()["usage"]["completion_tokens"] == 3
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True}
        with client.stream("POST", proxy.url + "/v1/chat/completions", json=body) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        assert json.loads(events[0])["choices"][0]["delta"]["role"] == "assistant"
        assert events[-1] == "[DONE]"
        assert client.get(proxy.url + "/v1/models").json()["data"][0]["id"] == MODEL
        assert client.get(proxy.url + "/health").status_code == 200

        # the agent scrapes the proxy like any target: its parser and sources read it
        text = client.get(proxy.url + "/metrics").text
        assert _metric(text, "slotune_route_decisions_total", policy="least-requests") == 6
        assert _metric(text, "slotune_route_backend_up") == 2
        assert _metric(text, "slotune_route_overhead_seconds_count") == 6
        scrape = VllmSource(["x"]).from_families(
            list(PromTextParser().parse(text, source="proxy").families)
        )
        assert not scrape.skipped
        assert {f.name for f in scrape.raw} >= {
            "slotune_route_decisions_total",
            "slotune_route_backend_state",
            "slotune_route_overhead_seconds",
        }

        # the live load was read from the engines' /metrics: tokens were generated
        assert wait_until(
            lambda: all(b._last_totals is not None for b in proxy.proxy.backends.values())
        )


def test_client_errors_are_answered_by_the_proxy(two_engines: list[Engine]) -> None:
    with (
        running_proxy(fleet_yaml([e.url for e in two_engines])) as proxy,
        httpx.Client(timeout=30) as client,
    ):
        r = client.post(proxy.url + "/v1/completions", json={"model": "other", "prompt": "x"})
        assert r.status_code == 404
        assert r.json()["error"]["message"] == "The model `other` does not exist."
        r = client.post(proxy.url + "/v1/completions", content=b"{not json")
        assert r.status_code == 400
        # the engine's own 400 passes through unchanged, and does not count against it
        r = client.post(proxy.url + "/v1/completions", json={"prompt": "x", "max_tokens": -1})
        assert r.status_code == 400
        assert "max_tokens" in r.json()["error"]["message"]
        assert all(b.can_send() for b in proxy.proxy.backends.values())


def _aborted(engine: Engine) -> float:
    text = httpx.get(engine.url + "/metrics").text
    return _metric(text, "vllm:request_success_total", finished_reason="abort")


def test_a_client_leaving_mid_stream_cancels_the_upstream_request(
    two_engines: list[Engine],
) -> None:
    with (
        running_proxy(fleet_yaml([e.url for e in two_engines])) as proxy,
        httpx.Client(timeout=30) as client,
    ):
        before = sum(_aborted(e) for e in two_engines)
        body = {"prompt": "long answer please", "max_tokens": 20000, "stream": True}
        with client.stream("POST", proxy.url + "/v1/completions", json=body) as r:
            lines = r.iter_lines()
            for _ in range(3):
                next(lines)
        # the client closed its connection after three events
        assert wait_until(lambda: sum(_aborted(e) for e in two_engines) == before + 1)
        assert wait_until(lambda: all(b.in_flight == 0 for b in proxy.proxy.backends.values()))
        assert all(b.can_send() for b in proxy.proxy.backends.values())


class _ShedLong:
    """A policy that sheds prompts over 10 tokens and sends the rest to the first replica."""

    name = "shed-long"

    def choose(self, request: RequestInfo, replicas: Sequence[ReplicaState]) -> Decision:
        if request.input_tokens > 10:
            return Decision(None, shed_reason="too long", retry_after_s=2.5)
        return Decision(replicas[0].name)

    def on_finish(self, request: RequestInfo, replica: str, output_tokens: int) -> None:
        self.finished = (request.request_id, replica, output_tokens)


def test_sheds_answer_429_with_retry_after(two_engines: list[Engine]) -> None:
    policy = _ShedLong()
    with (
        running_proxy(fleet_yaml([e.url for e in two_engines]), policy) as proxy,
        httpx.Client(timeout=30) as client,
    ):
        r = client.post(proxy.url + "/v1/completions", json={"prompt": "word " * 20})
        assert r.status_code == 429
        assert r.headers["Retry-After"] == "3"
        assert r.json()["error"]["message"] == "shed: too long"
        r = client.post(proxy.url + "/v1/completions", json={"prompt": "short", "max_tokens": 4})
        assert r.status_code == 200
        assert policy.finished[1:] == ("b0", 4)
        text = client.get(proxy.url + "/metrics").text
        assert _metric(text, "slotune_route_shed_total", policy="shed-long", reason="policy") == 1


def test_max_in_flight_sheds_beyond_the_limit(two_engines: list[Engine]) -> None:
    yaml_text = fleet_yaml(
        [e.url for e in two_engines], extra="shedding: {max_in_flight: 1, retry_after: 4s}\n"
    )
    with running_proxy(yaml_text) as proxy, httpx.Client(timeout=30) as client:
        body = {"prompt": "hold", "max_tokens": 20000, "stream": True}
        with client.stream("POST", proxy.url + "/v1/completions", json=body) as held:
            lines = held.iter_lines()  # kept: a dropped iterator closes the stream
            next(lines)
            r = client.post(proxy.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2})
            assert r.status_code == 429
            assert r.headers["Retry-After"] == "4"
        assert wait_until(lambda: proxy.proxy.in_flight == 0)
        r = client.post(proxy.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2})
        assert r.status_code == 200


def test_the_agent_scrapes_the_proxy_like_any_target(
    two_engines: list[Engine], tmp_path: Path
) -> None:
    with (
        running_proxy(fleet_yaml([e.url for e in two_engines])) as proxy,
        httpx.Client(timeout=30) as client,
    ):
        for _ in range(3):
            r = client.post(proxy.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2})
            assert r.status_code == 200
        db = f"sqlite:///{tmp_path / 'agent.db'}"
        for argv in (
            ["db", "upgrade"],
            ["agent", "--once", "--scrape", f"vllm={proxy.url}", "--node", "n1"],
        ):
            r2 = subprocess.run(
                [SLOTUNE, "--db", db, *argv], capture_output=True, text=True, timeout=120
            )
            assert r2.returncode == 0, r2.stderr
    with open_store(db) as store:
        target = f"vllm@127.0.0.1:{proxy.port}"
        assert latest_value(store, target, "slotune_route_decisions_total") == 3
        assert latest_value(store, target, "slotune_route_backend_up") == 2


def test_slo_aware_sheds_by_predicted_wait_from_live_rates() -> None:
    body = {"prompt": "context " * 4000, "max_tokens": 2, "stream": True}
    with (
        # real time: a burst of long prompts keeps a queue over several reads
        engines(1, speedup=1) as [engine],
        # a 1 ms TTFT budget: once a queue showed the rates, a long prompt is predicted late
        running_proxy(fleet_yaml([engine.url], policy="slo-aware:least-requests:ttft=1")) as proxy,
        httpx.Client(timeout=60) as client,
        ThreadPoolExecutor(16) as pool,
    ):

        def send(_: int) -> httpx.Response:
            return client.post(proxy.url + "/v1/completions", json=body)

        first = [r.status_code for r in pool.map(send, range(16))]
        assert first == [200] * 16  # nothing measured yet: all admitted, and they queue
        for _ in range(20):  # bounded: bursts until a read between two queued reads
            shed = [r for r in pool.map(send, range(16)) if r.status_code == 429]
            if shed:
                break
        assert shed
        assert int(shed[0].headers["Retry-After"]) >= 1
        assert "exceeds the TTFT budget" in shed[0].json()["error"]["message"]
        metrics = client.get(proxy.url + "/metrics").text
        assert _metric(metrics, "slotune_route_shed_total", reason="policy") == len(shed)


def test_prefix_affinity_keeps_a_session_and_a_shared_prefix_on_one_backend(
    two_engines: list[Engine],
) -> None:
    text = fleet_yaml([e.url for e in two_engines], policy="prefix-affinity")
    system = "you are a helpful assistant " * 40
    with running_proxy(text) as proxy, httpx.Client(timeout=30) as client:

        def backend(body: dict[str, object], headers: dict[str, str] | None = None) -> str:
            r = client.post(proxy.url + "/v1/completions", json=body, headers=headers)
            assert r.status_code == 200
            return r.headers["X-Slotune-Backend"]

        by_session = {
            backend({"prompt": f"turn {i}", "max_tokens": 2}, {"X-Session-Id": "s1"})
            for i in range(4)
        }
        assert len(by_session) == 1
        by_prefix = {
            backend({"prompt": f"{system} question {i}", "max_tokens": 2}) for i in range(4)
        }
        assert len(by_prefix) == 1
