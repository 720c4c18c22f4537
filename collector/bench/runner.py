"""Run a benchmark: send the plan's requests, keep the measured ones, summarize.

Open loop: each request is sent at its scheduled time whether or not earlier ones finished.
Closed loop: ``concurrency`` workers each send the next request when their last one ends.
Either way a request's failure is recorded and the run goes on; every request is bounded
by the per-request timeout, so the run is bounded too.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Iterator
from enum import StrEnum
from typing import Protocol

import aiohttp

from slotune.collector.bench.client import (
    ClientOptions,
    ClientResult,
    ErrorKind,
    Prompt,
    discover_model,
    model_context,
    send_request,
    timing_trace_config,
)
from slotune.collector.bench.config import BenchConfig
from slotune.collector.bench.plan import Plan, make_plan
from slotune.collector.bench.prompts import PromptBuilder, TokenCounter, token_counter
from slotune.collector.bench.result import BenchResult, build_result
from slotune.collector.errors import ConfigError
from slotune.collector.records import RequestRecord

START_LEAD_S = 0.05  # schedule origin a little ahead, so request 0 is not already late
REFRESH_S = 0.5


class Phase(StrEnum):
    WARMUP = "warmup"
    MEASURED = "measured"
    COOLDOWN = "cooldown"


class ProgressSink(Protocol):
    """Receives progress while a run goes (the Rich display implements it)."""

    def start(self, num_measured: int | None, duration_s: float | None) -> None: ...

    def record(self, record: RequestRecord) -> None: ...

    def refresh(self) -> None: ...

    def stop(self) -> None: ...


class _Run:
    """Shared state of one run while requests are in flight."""

    def __init__(
        self,
        plan: Plan,
        config: BenchConfig,
        session: aiohttp.ClientSession,
        options: ClientOptions,
        sink: ProgressSink | None,
        counter: TokenCounter,
    ) -> None:
        self.plan, self.config, self.session, self.options = plan, config, session, options
        self.sink = sink
        self.counter = counter
        self.builder = PromptBuilder(
            seed=config.seed, shared_prefix_tokens=config.shared_prefix_tokens, counter=self.counter
        )
        self.results: dict[int, ClientResult] = {}
        self.measured_in_flight = 0
        self.window_closed = False
        self.measured_done = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.cooldown_tasks: list[asyncio.Task[None]] = []
        self.num_cancelled = 0  # cool-down requests still in flight at the end
        self.measure_start_s: float | None = None

    def prompt(self, i: int) -> Prompt:
        return self.builder.build(self.plan.trace.requests[i], i)

    def phase_of(self, i: int, now_s: float) -> Phase:
        if i < self.plan.num_warmup:
            return Phase.WARMUP
        m = self.plan.num_measured
        if m is not None:
            return Phase.MEASURED if i < self.plan.num_warmup + m else Phase.COOLDOWN
        # closed loop by duration: measured while the window is open
        if self.measure_start_s is None:
            self.measure_start_s = now_s
        duration_s = self.config.duration_s or 0.0
        return Phase.MEASURED if now_s < self.measure_start_s + duration_s else Phase.COOLDOWN

    def launch(
        self, i: int, prompt: Prompt, phase: Phase, scheduled_s: float | None
    ) -> asyncio.Task[None]:
        """Start one request; in-flight counts change before the task first runs."""
        if phase is Phase.MEASURED:
            self.measured_in_flight += 1
        task = asyncio.create_task(self._send(i, prompt, phase, scheduled_s))
        (self.cooldown_tasks if phase is Phase.COOLDOWN else self.tasks).append(task)
        return task

    async def _send(self, i: int, prompt: Prompt, phase: Phase, scheduled_s: float | None) -> None:
        request_id = f"req-{i}"
        started_s = time.perf_counter()
        try:
            result = await send_request(
                self.session,
                self.options,
                request_id,
                prompt,
                scheduled_s=scheduled_s,
                counter=self.counter.count,
            )
        except Exception as e:
            # send_request turns every failure into a record; should anything still escape,
            # the request was sent and must not vanish from the run.
            detail = f"{type(e).__name__}: {e}"[:300]
            record = RequestRecord(
                request_id, started_s, None, None, error=ErrorKind.PROTOCOL, error_detail=detail
            )
            result = ClientResult(record, 0)
        finally:
            if phase is Phase.MEASURED:
                self.measured_in_flight -= 1
                self._check_done()
        if phase is Phase.MEASURED:
            self.results[i] = result
            if self.sink is not None:
                self.sink.record(result.record)

    def close_window(self) -> None:
        """No more measured requests will be sent."""
        self.window_closed = True
        self._check_done()

    def _check_done(self) -> None:
        if self.window_closed and self.measured_in_flight == 0:
            self.measured_done.set()

    async def finish(self) -> None:
        self.close_window()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for task in self.cooldown_tasks:
            if not task.done():
                self.num_cancelled += 1
                task.cancel()
        await asyncio.gather(*self.cooldown_tasks, return_exceptions=True)


async def _open_loop(run: _Run) -> None:
    plan = run.plan
    assert plan.times_s is not None
    prompts = [run.prompt(i) for i in range(len(plan.trace))]
    origin = time.perf_counter() + START_LEAD_S
    for i, offset in enumerate(plan.times_s):
        target = origin + float(offset)
        phase = run.phase_of(i, target)
        delay = target - time.perf_counter()
        if phase is Phase.COOLDOWN:
            run.close_window()
            if await _done_within(run.measured_done, delay):
                break
        elif delay > 0:
            await asyncio.sleep(delay)
        run.launch(i, prompts[i], phase, target)
    await run.finish()


async def _done_within(event: asyncio.Event, delay_s: float) -> bool:
    if event.is_set():
        return True
    if delay_s <= 0:
        return False
    try:
        await asyncio.wait_for(event.wait(), delay_s)
    except TimeoutError:
        return False
    return True


async def _closed_loop(run: _Run) -> None:
    supply = iter(range(len(run.plan.trace)))
    done_wait = asyncio.ensure_future(run.measured_done.wait())

    async def worker() -> None:
        for i in supply:
            phase = run.phase_of(i, time.perf_counter())
            if phase is Phase.COOLDOWN:
                run.close_window()
                if run.measured_done.is_set() or not run.config.cooldown:
                    return
            task = run.launch(i, run.prompt(i), phase, None)
            if phase is Phase.COOLDOWN:
                await asyncio.wait({task, done_wait}, return_when=asyncio.FIRST_COMPLETED)
                if run.measured_done.is_set():
                    return
            else:
                await asyncio.wait({task})

    concurrency = run.config.arrival.concurrency or 1
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    done_wait.cancel()
    await run.finish()


async def arun_benchmark(
    config: BenchConfig,
    *,
    progress: ProgressSink | None = None,
    refuse_over_context: bool = False,
) -> BenchResult:
    """Run one benchmark (async); see :func:`run_benchmark`."""
    plan = make_plan(config)
    # Before the server is asked anything: a bad --tokenizer is refused even with no server.
    counter = token_counter(config.tokenizer)
    started_at = time.time()
    wall_offset_s = started_at - time.perf_counter()
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
    async with aiohttp.ClientSession(
        connector=connector,
        trace_configs=[timing_trace_config()],
        timeout=aiohttp.ClientTimeout(total=None),
    ) as session:
        model = config.model or await discover_model(session, config.url, config.api_key)
        if refuse_over_context:
            context = await model_context(session, config.url, config.api_key, model)
            if context is not None:
                check_context(plan, model, context)
        options = ClientOptions(
            base_url=config.url,
            model=model,
            endpoint=config.endpoint,
            timeout_s=config.timeout_s,
            api_key=config.api_key,
            stream=config.stream,
            ignore_eos=config.ignore_eos,
        )
        run = _Run(plan, config, session, options, progress, counter)
        refresher = asyncio.create_task(_refresh(progress)) if progress is not None else None
        if progress is not None:
            progress.start(plan.num_measured, config.duration_s)
        try:
            with _no_gc_pauses():
                await (_open_loop(run) if config.arrival.is_open_loop else _closed_loop(run))
        finally:
            if refresher is not None:
                refresher.cancel()
            if progress is not None:
                progress.stop()
    results = [run.results[i] for i in sorted(run.results)]
    return build_result(
        config,
        plan,
        results,
        model,
        started_at,
        wall_offset_s,
        num_cooldown=len(run.cooldown_tasks),
        num_cooldown_cancelled=run.num_cancelled,
    )


@contextlib.contextmanager
def _no_gc_pauses() -> Iterator[None]:
    """Keep the cyclic garbage collector from stopping the loop while requests stream.

    A full collection over a run's records takes milliseconds, and every chunk that arrives
    meanwhile would be stamped late. Records and chunk lists hold no reference cycles, so
    reference counting still frees them; whatever cycles the run leaves are collected after.
    """
    was_enabled = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


async def _refresh(sink: ProgressSink) -> None:
    while True:
        await asyncio.sleep(REFRESH_S)
        sink.refresh()


def check_context(plan: Plan, model: str, context: int) -> None:
    """Refuse a plan with requests longer than the model's context (the server would answer
    each of them HTTP 400, and the client would build their prompts for nothing).

    Raises:
        ConfigError: naming how many requests are too long, the longest, and the context.
    """
    too_long = [r for r in plan.trace.requests if r.input_tokens + r.output_tokens > context]
    if too_long:
        worst = max(too_long, key=lambda r: r.input_tokens + r.output_tokens)
        raise ConfigError(
            f"{len(too_long)} of {len(plan.trace)} requests ask more tokens than {model}'s "
            f"context of {context} (its /v1/models max_model_len), up to {worst.input_tokens} "
            f"input + {worst.output_tokens} output; lower --input-len / --output-len or "
            "--turns, or use a trace that fits"
        )


def run_benchmark(
    config: BenchConfig, *, progress: bool = False, refuse_over_context: bool = False
) -> BenchResult:
    """Run one benchmark and return its measured requests and summary.

    Args:
        config: what to run.
        progress: show a live Rich display on stderr.
        refuse_over_context: ask ``/v1/models`` for the model's context and refuse a plan
            with requests that do not fit (:func:`check_context`); ``slotune bench`` does,
            the tuner does not (a trial's too-long requests are its errors to count).

    Raises:
        ConfigError: bad settings, unreachable server for model discovery, short trace,
            requests longer than the model's context (with ``refuse_over_context``).
    """
    sink: ProgressSink | None = None
    if progress:
        from slotune.collector.bench.render import LiveProgress

        sink = LiveProgress(config.slos)
    return asyncio.run(
        arun_benchmark(config, progress=sink, refuse_over_context=refuse_over_context)
    )
