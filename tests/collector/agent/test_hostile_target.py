"""A target whose exposition is built to be slow to read, beside healthy ones.

Real HTTP servers on 127.0.0.1, a real store, the agent's own scrape loop over a bounded run.
The healthy targets must have every scrape stored; the hostile one fails alone, with the
reason named. Deadlines are the healthy targets' intervals, generous for a loaded machine;
the hostile target's scrape timeout is the one under test.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from agent_helpers import MetricsServer, Routes, models_json, samples_of, vllm_exposition

from slotune.collector.agent.base import Response, Scrape, SourceKind
from slotune.collector.agent.loop import Agent
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import TargetSpec, make_target
from slotune.collector.agent.vllm import VllmSource
from slotune.collector.agent.writer import StoreWriter

Server = Callable[[Routes], MetricsServer]

HEALTHY_INTERVAL_S = 2.0
# Five scrapes of each target are due (at 0, 2, 4, 6 and 8 s); three must happen, so a loaded
# machine may delay them by two intervals. A parser on the event loop that backtracks leaves
# the healthy targets one or two; one in a worker thread still times the hostile one out.
RUN_S = 9.0
MIN_SCRAPES = 3
NUM_HEALTHY = 3
HOSTILE_LINES_PER_SCRAPE = 3


def redos_line(n: int) -> str:
    """12 KB that a backtracking sample regex reads in quadratic time (new at each scrape)."""
    spaces = " " * 4000
    return f"a{n}{spaces}1{spaces}1{spaces}{{"


def _busy_exposition(waiting: Iterator[int]) -> str:
    return vllm_exposition([1, 0, 0, 0, 0, 0, 0], waiting=next(waiting))


def healthy_servers(metrics_server: Server, num: int = NUM_HEALTHY) -> list[MetricsServer]:
    servers = []
    for i in range(num):
        waiting = itertools.count()
        servers.append(
            metrics_server(
                {
                    "/metrics": partial(_busy_exposition, waiting),
                    "/v1/models": partial(models_json, f"model-{i}"),
                }
            )
        )
    return servers


def healthy_targets(servers: list[MetricsServer]) -> list[TargetSpec]:
    return [
        make_target(
            SourceKind.VLLM, s.url, node="n", name=f"healthy-{i}", interval_s=HEALTHY_INTERVAL_S
        )
        for i, s in enumerate(servers)
    ]


def run_agent(store_url: str, tmp_path: Path, targets: list[TargetSpec]) -> Agent:
    writer = StoreWriter(store_url, Spool(tmp_path / "spool"), flush_interval_s=0.05)
    return Agent(targets, writer, heartbeat_s=0.0)  # every sample of every scrape written


def assert_every_scrape_stored(
    store_url: str, target: str, server: MetricsServer, name: str
) -> None:
    num_scrapes = server.num_gets["/metrics"]
    stored = samples_of(store_url, target)
    assert num_scrapes >= MIN_SCRAPES
    assert stored["up"] == num_scrapes
    assert stored[name] == num_scrapes


def assert_every_healthy_scrape_stored(store_url: str, servers: list[MetricsServer]) -> None:
    for i, server in enumerate(servers):
        assert_every_scrape_stored(store_url, f"healthy-{i}", server, "vllm:num_requests_waiting")


@pytest.mark.slow
def test_a_redos_target_leaves_every_healthy_scrape_stored(
    agent_db: str, tmp_path: Path, metrics_server: Server
) -> None:
    servers = healthy_servers(metrics_server)
    lines = itertools.count()

    def hostile_body() -> str:
        bad = "\n".join(redos_line(next(lines)) for _ in range(HOSTILE_LINES_PER_SCRAPE))
        return f"vllm:num_requests_running 1\n{bad}\n"

    hostile = metrics_server(
        {"/metrics": hostile_body, "/v1/models": lambda: models_json("hostile")}
    )
    targets = [
        *healthy_targets(servers),
        make_target(
            SourceKind.VLLM, hostile.url, node="n", name="hostile", interval_s=HEALTHY_INTERVAL_S
        ),
    ]
    agent = run_agent(agent_db, tmp_path, targets)
    try:
        asyncio.run(agent.run(duration_s=RUN_S))
    finally:
        agent.close()
    assert_every_healthy_scrape_stored(agent_db, servers)
    # the hostile lines are skipped, the rest of each body stored
    assert_every_scrape_stored(agent_db, "hostile", hostile, "vllm:num_requests_running")


class SlowToReadSource(VllmSource):
    """Parses as if each body took longer than the scrape timeout to read."""

    delay_s = 0.0

    def read(self, responses: list[tuple[str, Response]]) -> Scrape:
        time.sleep(self.delay_s)  # blocks its worker thread, not the event loop
        return super().read(responses)


@pytest.mark.slow
def test_a_target_slower_to_parse_than_its_scrape_timeout_fails_alone(
    agent_db: str, tmp_path: Path, metrics_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    servers = healthy_servers(metrics_server)
    body = "".join(f'vllm:num_requests_running{{n="{i}"}} 1\n' for i in range(1000))
    slow = metrics_server({"/metrics": lambda: body, "/v1/models": lambda: models_json("s")})
    timeout_s = 0.3
    slow_target = make_target(
        SourceKind.VLLM, slow.url, node="n", name="slow", interval_s=1.0, scrape_timeout_s=timeout_s
    )
    agent = run_agent(agent_db, tmp_path, [*healthy_targets(servers), slow_target])
    source = SlowToReadSource(slow_target.metrics_urls)
    source.delay_s = timeout_s + 0.1  # past the deadline, within the loop's grace
    agent.runners[-1].source = source
    caplog.set_level(logging.WARNING)
    try:
        asyncio.run(agent.run(duration_s=RUN_S))
    finally:
        agent.close()
    assert_every_healthy_scrape_stored(agent_db, servers)
    stored = samples_of(agent_db, "slow")
    assert stored["up"] >= 1 and "vllm:num_requests_running" not in stored
    assert "target slow is down" in caplog.text
    assert "scrape_timeout" in caplog.text


def test_a_target_slower_to_answer_than_its_scrape_timeout_is_down_with_the_reason(
    agent_db: str, tmp_path: Path, metrics_server: Server
) -> None:
    (healthy,) = healthy_servers(metrics_server, num=1)

    def late() -> str:
        time.sleep(2.0)
        return "vllm:num_requests_running 1\n"

    slow = metrics_server({"/metrics": late})
    targets = [
        make_target(SourceKind.VLLM, healthy.url, node="n", name="healthy-0", interval_s=60.0),
        make_target(
            SourceKind.VLLM, slow.url, node="n", name="slow", interval_s=60.0, scrape_timeout_s=0.3
        ),
    ]
    agent = run_agent(agent_db, tmp_path, targets)
    try:
        by_name = {o.target: o for o in asyncio.run(agent.scrape_all_once())}
    finally:
        agent.close()
    assert by_name["healthy-0"].is_up
    assert not by_name["slow"].is_up
    assert "did not answer within 0.3 s" in by_name["slow"].error
