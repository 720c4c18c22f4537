"""Test helpers: an emulated engine on a background event loop, driven by a small fake core.

The fake core prefills every waiting request in one step and decodes one token per running
request per step, each step lasting ``step_s`` emulated seconds; it stands in for the
simulator's core so these tests exercise the HTTP, SSE, metrics and real-time layers alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from slotune.tuner.emulate.app import Served
from slotune.tuner.emulate.faces import sglang_served, trtllm_served, vllm_served
from slotune.tuner.emulate.served import ServedModel
from slotune.tuner.emulate.server import Emulator
from slotune.tuner.emulate.settings import ServerSettings
from slotune.tuner.emulate.trtllm_metrics import TrtllmMetrics, TrtllmStatic
from slotune.tuner.emulate.vllm_metrics import VllmMetrics
from slotune.tuner.sim.engine import EngineStats
from slotune.tuner.sim.memory import KvCapacity
from slotune.tuner.sim.request import SimRequest

MODEL = "test-model"
MAX_MODEL_LEN = 256


@dataclass
class FakeStats:
    requests_running: int = 0
    requests_waiting: int = 0
    kv_usage: float = 0.0
    prefix_queries: int = 0
    prefix_hits: int = 0
    preemptions: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    kv_blocks: int = 1000
    kv_tokens: int = 16000
    num_steps: int = 0
    last_step_tokens: int = 0


@dataclass(frozen=True)
class FakeStep:
    duration_s: float
    tokens: list[tuple[str, int]]
    finished: list[str]
    started: list[str]
    preempted: list[str] = field(default_factory=list)
    started_cached_tokens: tuple[int, ...] = ()


class FakeCore:
    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.waiting: list[SimRequest] = []
        self.running: dict[str, list[int]] = {}  # id -> [generated, max_tokens]
        self._stats = FakeStats()

    @property
    def stats(self) -> EngineStats:
        """A frozen snapshot, as the real core gives."""
        return EngineStats(**dataclasses.asdict(self._stats))

    def add_request(self, request: SimRequest) -> None:
        self.waiting.append(request)
        self._stats.requests_waiting = len(self.waiting)

    def abort(self, request_id: str) -> None:
        self.waiting = [r for r in self.waiting if r.request_id != request_id]
        self.running.pop(request_id, None)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def step(self, *, with_split: bool = True) -> FakeStep | None:
        if not self.has_unfinished():
            return None
        started = [r.request_id for r in self.waiting]
        for r in self.waiting:
            self.running[r.request_id] = [0, r.max_tokens]
            self._stats.prompt_tokens += r.prompt_tokens
            self._stats.prefix_queries += r.prompt_tokens
        self.waiting = []
        tokens, finished = [], []
        for rid, state in list(self.running.items()):
            state[0] += 1
            tokens.append((rid, 1))
            if state[0] >= state[1]:
                finished.append(rid)
                del self.running[rid]
        self._stats.generation_tokens += len(tokens)
        self._stats.requests_running = len(self.running)
        self._stats.requests_waiting = 0
        self._stats.kv_usage = min(1.0, len(self.running) / 100)
        return FakeStep(self.step_s, tokens, finished, started)


def new_request(
    request_id: str,
    arrival_s: float,
    prompt_token_ids: Sequence[int],
    max_tokens: int,
    min_tokens: int,
) -> SimRequest:
    return SimRequest(
        request_id=request_id,
        arrival_s=arrival_s,
        prompt_tokens=len(prompt_token_ids),
        max_tokens=max_tokens,
        prompt_token_ids=tuple(prompt_token_ids),
    )


class RunningEmulator:
    """An :class:`Emulator` serving on 127.0.0.1 from a background thread."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        self.port = 0
        self.error: Exception | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await self.emulator.serve(self._stop, on_ready=self._on_ready)

        try:
            asyncio.run(run())
        except Exception as e:  # handed to the test through .error
            self.error = e

    def _on_ready(self, port: int) -> None:
        self.port = port
        self._ready.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RunningEmulator:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("emulator did not start within 10 s")
        return self

    def join(self, timeout_s: float = 10) -> None:
        """Wait for the server thread to end by itself."""
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "the server did not stop"

    def close(self) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def make_emulator(
    engine: str = "vllm",
    step_s: float = 0.01,
    speedup: float = 1.0,
    timings_file: Path | None = None,
) -> RunningEmulator:
    settings = ServerSettings(
        host="127.0.0.1", port=0, engine=engine, speedup=speedup, timings_file=timings_file
    )
    return RunningEmulator(Emulator(FakeCore(step_s), new_request, served_for(engine), settings))


def served_for(engine: str) -> Served:
    """The engine's face over the fake core's model and KV pool."""
    owner = {"vllm": "vllm", "trtllm": "tensorrt_llm", "sglang": "sglang"}[engine]
    model = ServedModel(MODEL, "org/test-model", MAX_MODEL_LEN, owner, "0.1.0")
    if engine == "vllm":
        labels = {"block_size": "16", "enable_prefix_caching": "True"}
        return vllm_served(model, VllmMetrics(MODEL, MAX_MODEL_LEN, labels))
    if engine == "trtllm":
        return trtllm_served(model, TrtllmMetrics(MODEL, TrtllmStatic(64, 8192, 16, 1 << 30)))
    args = {"model_path": "org/test-model"}
    return sglang_served(model, FAKE_CAPACITY, args, cuda_graph=True, gpu_mem_bytes=80 << 30)


FAKE_CAPACITY = KvCapacity(
    num_blocks=1000,
    num_tokens=16000,
    kv_bytes_per_token=1 << 17,
    weights_bytes=16 << 30,
    activation_bytes=1 << 30,
    cuda_graph_bytes=1 << 29,
    available_kv_bytes=2 << 30,
    max_concurrency=62.5,
    non_torch_bytes=1 << 29,
    block_size=16,
    max_model_len=MAX_MODEL_LEN,
    engine="sglang",
)


@dataclass
class Stream:
    send_s: float
    events: list[tuple[float, Any]]  # (time.time() at arrival, decoded JSON or "[DONE]")

    def token_events(self, kind: str) -> list[tuple[float, str]]:
        out = []
        for t, ev in self.events:
            if ev == "[DONE]" or not ev["choices"]:
                continue
            choice = ev["choices"][0]
            text = choice["text"] if kind == "completion" else choice["delta"].get("content", "")
            if text:
                out.append((t, text))
        return out


def stream(
    client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Stream:
    send_s = time.time()
    events: list[tuple[float, Any]] = []
    with client.stream("POST", url, json=body, headers=headers or {}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if not line:
                continue
            assert line.startswith("data: "), line
            payload = line[len("data: ") :]
            events.append((time.time(), payload if payload == "[DONE]" else json.loads(payload)))
    return Stream(send_s, events)
