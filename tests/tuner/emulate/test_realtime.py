"""The real-time loop: client-side TTFT/ITL against the engine's own timings; many streams."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import aiohttp
import httpx
from emulate_helpers import MODEL, FakeCore, make_emulator, new_request, stream

from slotune.collector.workload.tokens import count_tokens
from slotune.tuner.emulate.events import FinishedRequest, StepReport
from slotune.tuner.emulate.realtime import RealtimeEngine


def test_client_timings_match_the_timings_file(tmp_path: Path) -> None:
    timings = tmp_path / "timings.jsonl"
    running = make_emulator(step_s=0.02, timings_file=timings).start()
    try:
        with httpx.Client(timeout=10) as client:
            streams = {
                f"req-{i}": stream(
                    client,
                    f"{running.url}/v1/completions",
                    {
                        "model": MODEL,
                        "prompt": f"prompt {i}",
                        "max_tokens": 6,
                        "stream": True,
                        "stream_options": {"include_usage": True},
                    },
                    headers={"X-Request-Id": f"req-{i}"},
                )
                for i in range(4)
            }
    finally:
        running.close()
    lines = {d["request_id"]: d for d in map(json.loads, timings.read_text().splitlines())}
    assert set(lines) == set(streams)
    for rid, s in streams.items():
        server = lines[rid]
        client_tokens = s.token_events("completion")
        assert server["completion_tokens"] == 6 == sum(count_tokens(t) for _, t in client_tokens)
        assert len(server["token_times_s"]) == 6
        # The client sends before the server sees the request and reads after it writes.
        assert s.send_s <= server["arrival_s"] <= server["first_token_s"] <= client_tokens[0][0]
        # The client's TTFT holds the engine's: it starts earlier and ends later.
        client_ttft = client_tokens[0][0] - s.send_s
        assert client_ttft >= server["first_token_s"] - server["arrival_s"]
        # Each chunk is read after the engine wrote its last token.
        served = 0
        for at, text in client_tokens:
            served += count_tokens(text)
            assert at >= server["token_times_s"][served - 1]
        assert server["end_s"] >= server["token_times_s"][-1]


async def _many_streams(url: str, num: int, max_tokens: int) -> list[int]:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=60)
    ) as session:

        async def one(i: int) -> int:
            tokens = 0
            body = {"prompt": f"stream {i}", "max_tokens": max_tokens, "stream": True}
            async with session.post(f"{url}/v1/completions", json=body) as r:
                async for line in r.content:
                    if line.startswith(b"data: {"):
                        tokens += count_tokens(json.loads(line[6:])["choices"][0]["text"])
            return tokens

        return list(await asyncio.gather(*(one(i) for i in range(num))))


def test_256_concurrent_streams_all_complete() -> None:
    running = make_emulator(step_s=0.005).start()
    try:
        counts = asyncio.run(_many_streams(running.url, 256, 8))
        assert counts == [8] * 256
        metrics = httpx.get(f"{running.url}/metrics", timeout=10).text
        assert (
            'vllm:request_success_total{engine="0",finished_reason="length",'
            f'model_name="{MODEL}"}} 256.0' in metrics
        )
    finally:
        running.close()


def test_client_disconnect_aborts_the_request() -> None:
    running = make_emulator(step_s=0.01).start()
    try:
        with (
            httpx.Client(timeout=10) as client,
            client.stream(
                "POST",
                f"{running.url}/v1/completions",
                json={"prompt": "long", "max_tokens": 200, "stream": True},
            ) as r,
        ):
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    break
        for _ in range(200):
            metrics = httpx.get(f"{running.url}/metrics", timeout=10).text
            if 'finished_reason="abort",model_name="test-model"} 1.0' in metrics:
                break
            asyncio.run(asyncio.sleep(0.02))
        assert 'finished_reason="abort",model_name="test-model"} 1.0' in metrics
        assert running.emulator.engine.num_in_flight == 0
    finally:
        running.close()


def test_a_dead_engine_loop_stops_the_server() -> None:
    running = make_emulator(step_s=0.01).start()
    core = running.emulator.engine._core

    def broken_step(*, with_split: bool = True) -> None:
        raise RuntimeError("engine core failed")

    core.step = broken_step  # type: ignore[method-assign]
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(
            f"{running.url}/v1/completions", timeout=5, json={"prompt": "x", "max_tokens": 2}
        )
    running.join()
    assert isinstance(running.error, RuntimeError)


class _Finished:
    def __init__(self) -> None:
        self.records: list[FinishedRequest] = []

    def on_step(self, report: StepReport) -> None:
        pass

    def on_finished(self, request: FinishedRequest) -> None:
        self.records.append(request)


async def _stream_with_late_writes(observer: _Finished) -> tuple[list[float], int]:
    engine = RealtimeEngine(FakeCore(step_s=0.005), new_request, observers=[observer])
    loop_task = asyncio.create_task(engine.run())
    handle = engine.submit("r1", "client-1", (1, 2, 3), max_tokens=3, streamed=True)
    written = []
    async for delivery in handle.deliveries():
        written_s = time.time() + 1.0  # as if the write happened a second after the step
        handle.written(delivery.num_tokens, written_s)
        written += [written_s] * delivery.num_tokens
    held = len(observer.records)
    handle.close()
    engine.stop()
    await loop_task
    return written, held


def test_a_streamed_request_is_timed_when_its_tokens_are_written() -> None:
    observer = _Finished()
    written, held = asyncio.run(_stream_with_late_writes(observer))
    assert held == 0  # finished in the engine, but reported only once the server is done
    (record,) = observer.records
    line = record.to_timing_line()
    assert line["request_id"] == "client-1"
    assert line["token_times_s"] == written
    assert line["first_token_s"] == written[0]
    assert line["completion_tokens"] == 3
    # The metrics keep the engine's own step times.
    assert record.token_times_s[-1] < written[-1] - 0.5
