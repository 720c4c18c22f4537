"""The streaming client against a fake engine: every flavour, every failure kind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import pytest
from bench_fakes import FakeEngine, Flavour, Mode

from slotune.collector.bench.client import (
    ClientOptions,
    ClientResult,
    Endpoint,
    Prompt,
    assign_chunk_tokens,
    normalize_base_url,
    request_body,
    send_request,
)
from slotune.collector.errors import ConfigError

# Deadlines of the cases that do not test a timeout: a loaded machine may be slow, and a
# request that fails for another reason answers long before this.
SLACK_S = 120.0
# The one case that tests the timeout: the engine stalls for an hour, so any short value works.
STALL_TIMEOUT_S = 0.5

PROMPT = Prompt(
    text="a b c", messages=({"role": "user", "content": "a b c"},), input_tokens=3, output_tokens=6
)


def _send(
    engine: FakeEngine,
    endpoint: Endpoint = Endpoint.COMPLETIONS,
    *,
    timeout_s: float = SLACK_S,
    stream: bool = True,
    api_key: str | None = None,
    request_id: str = "req-0",
    url: str | None = None,
) -> ClientResult:
    options = ClientOptions(
        base_url=url or engine.url,
        model="fake-model",
        endpoint=endpoint,
        timeout_s=timeout_s,
        api_key=api_key,
        stream=stream,
    )

    async def go() -> ClientResult:
        async with aiohttp.ClientSession() as session:
            return await send_request(session, options, request_id, PROMPT, scheduled_s=1.0)

    return asyncio.run(go())


@pytest.mark.parametrize("endpoint", list(Endpoint))
@pytest.mark.parametrize("flavour", list(Flavour))
def test_every_flavour_streams_to_a_complete_record(
    fake_engine: Callable[..., FakeEngine], flavour: Flavour, endpoint: Endpoint
) -> None:
    engine = fake_engine(flavour=flavour)
    result = _send(engine, endpoint)
    r = result.record
    assert r.is_ok, r.error_detail
    assert r.output_tokens == 6 and r.input_tokens == 10  # server usage wins
    assert sum(r.chunk_tokens) == 6
    assert result.client_output_tokens == 6
    assert r.first_token_s is not None and r.end_s is not None and r.ttft_s is not None
    assert r.send_s < r.first_token_s <= r.chunk_times_s[-1] <= r.end_s
    assert r.ttft_s >= engine.first_token_delay_s
    assert list(r.chunk_times_s) == sorted(r.chunk_times_s)
    assert r.http_status == 200 and r.scheduled_s == 1.0
    per_chunk = 2 if flavour is Flavour.TRTLLM else 1
    assert max(r.chunk_tokens) == per_chunk
    if endpoint is Endpoint.CHAT:
        assert r.chunk_tokens[0] == 0  # role-only first chunk


def test_non_streaming_response_is_one_chunk_at_the_end(
    fake_engine: Callable[..., FakeEngine],
) -> None:
    r = _send(fake_engine(), Endpoint.CHAT, stream=False).record
    assert r.is_ok
    assert r.chunk_tokens == (6,) and r.first_token_s == r.end_s == r.chunk_times_s[0]


def test_request_carries_id_and_key_headers_and_usage_option(
    fake_engine: Callable[..., FakeEngine],
) -> None:
    engine = fake_engine()
    _send(engine, api_key="sk-secret", request_id="req-42")
    seen = engine.seen[0]
    assert seen["headers"]["X-Request-Id"] == "req-42"
    assert seen["headers"]["Authorization"] == "Bearer sk-secret"
    body = seen["body"]
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 6 and body["min_tokens"] == 6 and body["ignore_eos"] is True


@pytest.mark.parametrize(
    ("mode", "kind", "status"),
    [
        (Mode.HTTP_500, "http_5xx", 500),
        (Mode.HTTP_429, "http_4xx", 429),
        (Mode.STALL, "timeout", 200),
        (Mode.DROP, "disconnect", 200),
        (Mode.GARBAGE, "protocol", 200),
        (Mode.NO_DONE, "protocol", 200),
    ],
)
def test_failures_become_error_kinds_not_exceptions(
    fake_engine: Callable[..., FakeEngine], mode: Mode, kind: str, status: int
) -> None:
    engine = fake_engine(mode_of=lambda _rid: mode)
    r = _send(engine, timeout_s=STALL_TIMEOUT_S if mode is Mode.STALL else SLACK_S).record
    assert r.error == kind, r.error_detail
    assert r.http_status == status
    assert not r.is_ok and r.end_s is None


def test_refused_connection_is_a_connect_error(fake_engine: Callable[..., FakeEngine]) -> None:
    engine = fake_engine()
    port = engine.port
    engine.stop()
    r = _send(engine, url=f"http://127.0.0.1:{port}").record
    assert r.error == "connect" and r.http_status is None


def test_api_key_never_appears_in_an_error_detail(fake_engine: Callable[..., FakeEngine]) -> None:
    engine = fake_engine(mode_of=lambda _rid: Mode.HTTP_500)
    r = _send(engine, api_key="sk-very-secret").record
    assert "sk-very-secret" not in (r.error_detail or "") + repr(r)


def test_request_body_for_chat_uses_messages() -> None:
    options = ClientOptions(
        base_url="http://x", model="m", endpoint=Endpoint.CHAT, ignore_eos=False
    )
    body = request_body(options, PROMPT)
    assert body["messages"] == [{"role": "user", "content": "a b c"}]
    assert body["max_completion_tokens"] == 6
    assert "ignore_eos" not in body and "prompt" not in body


def test_base_url_normalization() -> None:
    assert normalize_base_url("http://h:8000/v1/") == "http://h:8000"
    assert normalize_base_url(" https://h ") == "https://h"
    with pytest.raises(ConfigError, match="http://"):
        normalize_base_url("h:8000")


@pytest.mark.parametrize(
    ("estimates", "explicit", "usage", "expected"),
    [
        ([0, 1, 1, 1, 0], False, 3, (0, 1, 1, 1, 0)),  # estimates agree with usage
        ([0, 2, 1, 2, 0], False, 3, (0, 1, 1, 1, 0)),  # one token per text chunk (vLLM)
        ([1, 3, 1], False, 8, (1, 6, 1)),  # several tokens per chunk: shared by the estimates
        ([2, 2], False, 5, (3, 2)),  # ties: remainder to the earliest
        ([2, 2, 1], True, 9, (2, 2, 1)),  # chunks that state their tokens are kept
        ([1, 1, 1], False, None, (1, 1, 1)),  # no usage: estimates stand
        ([1, 1, 1], False, 2, (1, 1, 1)),  # fewer tokens than text chunks: estimates stand
    ],
)
def test_chunk_tokens_are_reconciled_with_usage(
    estimates: list[int], explicit: bool, usage: int | None, expected: tuple[int, ...]
) -> None:
    assert assign_chunk_tokens(estimates, explicit, usage) == expected


def test_a_dropped_stream_keeps_the_chunks_that_came_before(
    fake_engine: Callable[..., FakeEngine],
) -> None:
    engine = fake_engine(mode_of=lambda _rid: Mode.DROP)
    r = _send(engine).record
    assert r.error == "disconnect"
    assert r.chunk_times_s and r.first_token_s is not None and r.send_s < r.first_token_s
