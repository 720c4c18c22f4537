"""The load generator against hostile servers: every request sent ends as a record with the
error kind its failure is, within ``--timeout``, with bounded memory."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import aiohttp
import pytest
from hostile import EXPECTED_ERROR, Hostile, HostileServer
from hypothesis import given, settings
from hypothesis import strategies as st

from slotune.collector.bench import (
    ArrivalSpec,
    BenchConfig,
    Endpoint,
    ErrorKind,
    run_benchmark,
    run_failure,
)
from slotune.collector.bench.client import ClientOptions, Prompt, send_request
from slotune.collector.records import UNTIMED_GAP_BOUNDS_S, RequestRecord

MODES = list(Hostile)
# The modes that never end on their own are cut by the timeout under test; every other reply
# ends by itself, and gets a deadline a loaded machine cannot reach.
TIMEOUT_UNDER_TEST_S = 1.0
SLACK_S = 120.0


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer(lambda rid: MODES[int(rid.rsplit("-", 1)[1]) % len(MODES)]).start()
    yield server
    server.stop()


def _options(url: str, mode: Hostile, max_timed_chunks: int) -> ClientOptions:
    timeout_s = TIMEOUT_UNDER_TEST_S if EXPECTED_ERROR[mode] == "timeout" else SLACK_S
    return ClientOptions(
        url, "hostile", Endpoint.COMPLETIONS, timeout_s=timeout_s, max_timed_chunks=max_timed_chunks
    )


async def _send_each(url: str, max_timed_chunks: int) -> list[RequestRecord]:
    prompt = Prompt("hi", ({"role": "user", "content": "hi"},), 1, 4)
    async with aiohttp.ClientSession() as session:
        results = await asyncio.gather(
            *(
                send_request(session, _options(url, mode, max_timed_chunks), f"req-{i}", prompt)
                for i, mode in enumerate(MODES)
            )
        )
    return [r.record for r in results]


def test_each_hostile_reply_ends_as_its_error_kind(hostile: HostileServer) -> None:
    records = asyncio.run(_send_each(hostile.url, max_timed_chunks=100))
    kinds = {mode: r.error for mode, r in zip(MODES, records, strict=True)}
    assert kinds == {mode: EXPECTED_ERROR[mode] for mode in MODES}
    endless = records[MODES.index(Hostile.ENDLESS)]
    assert len(endless.chunk_times_s) == 100  # the rest only counted
    assert endless.num_untimed_chunks > 0
    assert len(endless.untimed_gap_counts) == len(UNTIMED_GAP_BOUNDS_S) + 1
    assert sum(endless.untimed_gap_counts) == endless.num_untimed_chunks
    cut = records[MODES.index(Hostile.CUT)]
    assert len(cut.chunk_times_s) == 1  # what arrived before the cut still counts


@pytest.mark.slow
def test_a_run_against_a_hostile_server_loses_no_request(hostile: HostileServer) -> None:
    config = BenchConfig(
        url=hostile.url,
        arrival=ArrivalSpec.from_rate(float("inf")),
        model="hostile",
        input_len="4",
        output_len="4",
        num_requests=2 * len(MODES),
        # one timeout for every request: time enough for the replies that end on their own
        # (deep nesting, huge numbers) to be parsed on a loaded machine; the endless ones
        # still end as timeouts
        timeout_s=10.0,
    )
    result = run_benchmark(config)
    assert len(result.records) == 2 * len(MODES)  # (cool-down requests are sent too)
    for r in result.records:
        assert r.error == EXPECTED_ERROR[MODES[int(r.request_id.rsplit("-", 1)[1]) % len(MODES)]]
    assert result.summary.num_errors == 2 * len(MODES)
    failure = run_failure(result.summary)
    assert failure is not None and failure[0] == 1
    assert "every measured request failed" in failure[1]


_REPLY_PIECES = st.sampled_from(
    [
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 500 Oops\r\n",
        b"Content-Type: text/event-stream\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Content-Length: 5\r\n",
        b"\r\n",
        b"data: ",
        b"\n\n",
        b'{"choices":[{"text":"a"}]}',
        b'{"usage":{"completion_tokens":1e999}}',
        b"[DONE]",
        b"[" * 3000,
    ]
)


@settings(
    max_examples=int(os.environ.get("SLOTUNE_FUZZ_EXAMPLES", "25")), deadline=None, database=None
)
@given(st.lists(_REPLY_PIECES | st.binary(max_size=16), max_size=12).map(b"".join))
def test_any_reply_ends_as_a_record(reply: bytes) -> None:
    server = HostileServer(lambda _rid: reply).start()
    try:
        (record,) = asyncio.run(_send_one(server.url))
    finally:
        server.stop()
    assert record.request_id == "req-0"
    assert record.is_ok or record.error in {k.value for k in ErrorKind}


async def _send_one(url: str) -> list[RequestRecord]:
    # short: a reply that never ends must end the example; any error kind passes, so a slow
    # machine turning another failure into a timeout cannot fail the test
    options = ClientOptions(url, "hostile", Endpoint.COMPLETIONS, timeout_s=0.5)
    prompt = Prompt("hi", ({"role": "user", "content": "hi"},), 1, 4)
    async with aiohttp.ClientSession() as session:
        return [(await send_request(session, options, "req-0", prompt)).record]
