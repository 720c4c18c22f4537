"""The real-time loop: the simulator's engine core stepped against the wall clock.

One asyncio task runs ``core.step()``, sleeps until the step's emulated duration (divided by
the time scale) has passed since the step began, then hands each request its new tokens.
Step start times chain on absolute ``time.perf_counter()`` deadlines, so per-step sleep error
never accumulates: the N-th step of a busy stretch ends at ``t0 + sum(durations) / scale`` up
to one sleep's error. Requests that arrive while a step is "running" join the next step, as
in a continuous-batching engine.

Sleep precision: asyncio's epoll timeout has 1 ms granularity, so the loop sleeps until
``_SPIN_MARGIN_S`` before the deadline and then yields to the event loop (``sleep(0)``) until
the deadline passes; other requests' I/O keeps running during that short spin.

Lag: each step's tokens go out when the loop gets the CPU after the deadline; how much later
is the step's lag, measured on the loop's clock (``time.perf_counter`` unless a test injects
one) and counted by a :class:`~.lag.LagMonitor` (:attr:`RealtimeEngine.lag`), so a
measurement taken on a starved host says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from slotune.tuner.emulate.core_view import EngineCoreLike, StepLike
from slotune.tuner.emulate.events import FinishedRequest, FinishReason, StepReport, WireTimes
from slotune.tuner.emulate.lag import LagMonitor, LagReport
from slotune.tuner.sim.engine import EngineStats

_SPIN_MARGIN_S = 0.0015
# Behind the wall clock by more than this, the loop stops catching up and restarts its
# timeline at "now" (the process was starved; replaying the backlog would burst tokens).
_MAX_LAG_S = 0.050
_IDLE_POLL_S = 0.005


class EngineObserver(Protocol):
    """Receives what the loop did: metrics exporters and the timings file implement it."""

    def on_step(self, report: StepReport) -> None: ...

    def on_finished(self, request: FinishedRequest) -> None: ...


RequestFactory = Callable[[str, float, Sequence[int], int, int], Any]
"""Builds the core's request: (request_id, arrival_s, prompt_token_ids, max_tokens, min_tokens)."""


@dataclass(frozen=True, slots=True)
class Arrival:
    """The moment a request reached the server, on both clocks."""

    wall_s: float
    perf_s: float

    @classmethod
    def now(cls) -> Arrival:
        return cls(time.time(), time.perf_counter())


@dataclass(frozen=True, slots=True)
class Delivery:
    """New output tokens for one request (``num_tokens`` may be 0 on a bare finish)."""

    num_tokens: int
    is_finished: bool


@dataclass(slots=True)
class _Flight:
    """A request between arrival and finish (mutable; owned by the loop)."""

    request_id: str
    timing_id: str
    prompt_tokens: int
    max_tokens: int
    arrival_wall_s: float
    arrival_perf_s: float
    queue: asyncio.Queue[Delivery] = field(default_factory=asyncio.Queue)
    first_scheduled_wall_s: float | None = None
    last_token_perf_s: float | None = None
    token_times_s: list[float] = field(default_factory=list)
    is_finished: bool = False
    streamed: bool = False
    """The server reports each write (:meth:`RequestHandle.written`); the finished record
    waits for :meth:`RequestHandle.close` so that it carries the wire times."""
    wire_times_s: list[float] = field(default_factory=list)
    is_closed: bool = False
    held: Callable[[], None] | None = None
    preemptions: int = 0
    cached_tokens: int = 0


class RequestHandle:
    """The server's view of one submitted request: iterate it to receive tokens.

    The server calls :meth:`written` after writing each delivery of a streamed request and
    :meth:`close` when it is done with the request, whatever happened.
    """

    def __init__(self, flight: _Flight, close: Callable[[_Flight], None]) -> None:
        self._flight = flight
        self._close = close

    @property
    def request_id(self) -> str:
        return self._flight.request_id

    @property
    def prompt_tokens(self) -> int:
        return self._flight.prompt_tokens

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens found in the prefix cache when the request was first scheduled."""
        return self._flight.cached_tokens

    async def deliveries(self) -> AsyncIterator[Delivery]:
        """Token deliveries in order, ending with the one marked finished."""
        while True:
            delivery = await self._flight.queue.get()
            yield delivery
            if delivery.is_finished:
                return

    def written(self, num_tokens: int, wall_s: float) -> None:
        """``num_tokens`` new tokens went to the client's socket at ``wall_s`` (time.time)."""
        if num_tokens > 0:
            self._flight.wire_times_s.extend([wall_s] * num_tokens)

    def close(self) -> None:
        """The server is done with the request: abort it if unfinished, report it."""
        self._close(self._flight)


class RealtimeEngine:
    """Drives an engine core in real time and fans its output out to request handles.

    Args:
        core: the simulator's engine core.
        new_request: builds the core's request object.
        time_scale: the emulated GPU runs this many times faster than real time.
        observers: metrics exporters, the timings file.
        clock: the loop's clock for deadlines and lag (``time.perf_counter``; tests inject
            one that jumps, to stand for a starved process).
    """

    def __init__(
        self,
        core: EngineCoreLike,
        new_request: RequestFactory,
        time_scale: float = 1.0,
        observers: Sequence[EngineObserver] = (),
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        self._core = core
        self._new_request = new_request
        self._time_scale = time_scale
        self._observers = list(observers)
        self._flights: dict[str, _Flight] = {}
        self._wake = asyncio.Event()
        self._stopping = False
        self._origin_perf_s = time.perf_counter()
        self._counters = core.stats
        self._step_index = 0
        self._clock = clock
        self._lag = LagMonitor(time_scale)
        self.lateness_s: deque[float] = deque(maxlen=100_000)
        """Seconds each step ended after its deadline (the loop's scheduling jitter)."""

    @property
    def lag(self) -> LagReport:
        """The steps so far and how many ran late."""
        return self._lag.report()

    @property
    def counters(self) -> EngineStats:
        """The core's gauges and counters after the last step."""
        return self._counters

    @property
    def num_in_flight(self) -> int:
        return len(self._flights)

    def submit(
        self,
        request_id: str,
        timing_id: str,
        prompt_token_ids: Sequence[int],
        max_tokens: int,
        min_tokens: int = 0,
        received: Arrival | None = None,
        streamed: bool = False,
    ) -> RequestHandle:
        """Hand a request to the engine; it joins the next scheduler step.

        Args:
            request_id: the engine's id for the request (unique among those in flight).
            timing_id: the id written to the timings file.
            prompt_token_ids: the prompt.
            max_tokens: output tokens to generate.
            min_tokens: accepted for the core's request; the core generates ``max_tokens``.
            received: when the server received the request (default: now); TTFT, queue
                time and the timings file count from here, as vLLM counts from arrival.
            streamed: the server will report each write (:meth:`RequestHandle.written`); the
                timings file then gives the times tokens were written to the client.

        Raises:
            RequestRejected: the core refuses the request (too long for the engine).
        """
        arrival = received or Arrival.now()
        now_perf = arrival.perf_s
        flight = _Flight(
            request_id=request_id,
            timing_id=timing_id,
            prompt_tokens=len(prompt_token_ids),
            max_tokens=max_tokens,
            arrival_wall_s=arrival.wall_s,
            arrival_perf_s=now_perf,
            streamed=streamed,
        )
        arrival_s = (now_perf - self._origin_perf_s) * self._time_scale
        self._core.add_request(
            self._new_request(request_id, arrival_s, prompt_token_ids, max_tokens, min_tokens)
        )
        self._flights[request_id] = flight
        self._wake.set()
        return RequestHandle(flight, self._close)

    def abort(self, request_id: str) -> None:
        """Drop a request (client went away); it is counted with finish reason ``abort``."""
        flight = self._flights.pop(request_id, None)
        if flight is None:
            return
        self._core.abort(request_id)
        flight.is_finished = True
        self._finish(flight, FinishReason.ABORT, time.time())

    def _close(self, flight: _Flight) -> None:
        flight.is_closed = True
        if not flight.is_finished:
            self.abort(flight.request_id)
        elif flight.held is not None:
            report, flight.held = flight.held, None
            report()

    def stop(self) -> None:
        """Ask :meth:`run` to return after the current step."""
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        """Step the core until :meth:`stop` is called."""
        next_start: float | None = None
        while not self._stopping:
            if not self._core.has_unfinished():
                await self._idle()
                next_start = None
                continue
            now = self._clock()
            start = now if next_start is None or now - next_start > _MAX_LAG_S else next_start
            out = self._core.step(with_split=False)
            if out is None:
                await self._idle(timeout_s=_IDLE_POLL_S)
                next_start = None
                continue
            deadline = start + out.duration_s / self._time_scale
            await _sleep_until(deadline, self._clock)
            # a timeline restarted at "now" hides how far behind the loop was: count from
            # where the step should have started
            behind_s = start - next_start if next_start is not None else 0.0
            lag_s = self._clock() - deadline + behind_s
            self.lateness_s.append(lag_s)
            self._complete_step(out, start, deadline, lag_s)
            next_start = deadline

    async def _idle(self, timeout_s: float | None = None) -> None:
        self._wake.clear()
        if self._stopping:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout_s)

    def _complete_step(
        self, out: StepLike, start_perf: float, end_perf: float, lag_s: float
    ) -> None:
        wall_now = time.time()
        start_wall = wall_now - (self._clock() - start_perf)
        finished = set(out.finished)
        started: list[_Flight] = []
        cached = dict(zip(out.started, out.started_cached_tokens, strict=False))
        for request_id in out.started:
            flight = self._flights.get(request_id)
            if flight is not None and flight.first_scheduled_wall_s is None:
                flight.first_scheduled_wall_s = max(start_wall, flight.arrival_wall_s)
                flight.cached_tokens = cached.get(request_id, 0)
                started.append(flight)
        for request_id in out.preempted:
            flight = self._flights.get(request_id)
            if flight is not None:
                flight.preemptions += 1
        ttfts: list[float] = []
        itls: list[float] = []
        for request_id, num_tokens in out.tokens:
            flight = self._flights.get(request_id)
            if flight is None or num_tokens <= 0:
                continue
            if flight.last_token_perf_s is None:
                ttfts.append(end_perf - flight.arrival_perf_s)
            else:
                itls.append(end_perf - flight.last_token_perf_s)
            flight.last_token_perf_s = end_perf
            flight.token_times_s.extend([wall_now] * num_tokens)
            is_done = request_id in finished
            flight.queue.put_nowait(Delivery(num_tokens, is_done))
            if is_done:
                self._retire(flight, wall_now)
        for request_id in finished:
            flight = self._flights.get(request_id)
            if flight is not None:
                flight.queue.put_nowait(Delivery(0, True))
                self._retire(flight, wall_now)
        self._report_step(started, end_perf - start_perf, ttfts, itls, len(finished), lag_s)

    def _retire(self, flight: _Flight, end_wall_s: float) -> None:
        flight.is_finished = True
        del self._flights[flight.request_id]
        self._finish(flight, FinishReason.LENGTH, end_wall_s)

    def _finish(self, flight: _Flight, reason: FinishReason, end_wall_s: float) -> None:
        if flight.streamed and not flight.is_closed:
            flight.held = lambda: self._finish(flight, reason, end_wall_s)
            return
        wire = WireTimes(tuple(flight.wire_times_s), time.time()) if flight.streamed else None
        record = FinishedRequest(
            request_id=flight.request_id,
            timing_id=flight.timing_id,
            finish_reason=reason,
            prompt_tokens=flight.prompt_tokens,
            max_tokens=flight.max_tokens,
            arrival_s=flight.arrival_wall_s,
            first_scheduled_s=flight.first_scheduled_wall_s,
            first_token_s=flight.token_times_s[0] if flight.token_times_s else None,
            token_times_s=tuple(flight.token_times_s),
            end_s=end_wall_s,
            wire=wire,
            preemptions=flight.preemptions,
            cached_tokens=flight.cached_tokens,
        )
        for observer in self._observers:
            observer.on_finished(record)

    def _report_step(
        self,
        started: list[_Flight],
        duration_s: float,
        ttfts: list[float],
        itls: list[float],
        num_completed: int,
        lag_s: float,
    ) -> None:
        before = self._counters
        after = self._core.stats
        self._counters = after
        self._step_index += 1
        report = StepReport(
            index=self._step_index,
            duration_s=duration_s,
            counters=after,
            prompt_tokens=after.prompt_tokens - before.prompt_tokens,
            generation_tokens=after.generation_tokens - before.generation_tokens,
            preemptions=after.preemptions - before.preemptions,
            prefix_queries=after.prefix_queries - before.prefix_queries,
            prefix_hits=after.prefix_hits - before.prefix_hits,
            new_requests_queue_s=tuple(
                (f.first_scheduled_wall_s or f.arrival_wall_s) - f.arrival_wall_s for f in started
            ),
            num_context_requests=len(ttfts),
            num_generation_requests=len(itls),
            num_completed=num_completed,
            ttfts_s=tuple(ttfts),
            itls_s=tuple(itls),
            lag_s=lag_s,
            is_late=self._lag.observe(lag_s),
        )
        for observer in self._observers:
            observer.on_step(report)


async def _sleep_until(deadline_perf_s: float, clock: Callable[[], float]) -> None:
    remaining = deadline_perf_s - clock()
    if remaining > _SPIN_MARGIN_S:
        await asyncio.sleep(remaining - _SPIN_MARGIN_S)
    while clock() < deadline_perf_s:
        await asyncio.sleep(0)
