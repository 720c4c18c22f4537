"""One backend as the proxy sees it: its circuit, its live load, and the loop that reads it.

The load comes from the engine's own ``/metrics``, read by the agent's source for its kind
(vLLM, SGLang, TensorRT-LLM names mapped onto ``requests_running``, ``requests_waiting``,
``kv_usage``, ``generation_tokens``). Between two reads the proxy adds the requests it sent
since the last read to ``num_waiting``: the engine has not reported them yet, and without
them a burst arriving between reads would all go to the replica that looked idlest (one that
is over before the next read stops counting). And the
load is never below the proxy's own requests in flight there (a read can come before the
engine registered a request just sent).

Rates for predicted queueing delay (``slo-aware``) are capacities, as the fleet simulator's
are: measured only over the intervals between two reads that both saw a queue, requests
waiting or streamed prompts without their first token yet (the engine was as busy as it
gets; an idle one's token rate is its traffic, not what it can do), smoothed. ``throughput_tps`` is prompt plus generated tokens per second,
``prefill_tps`` prompt tokens per second, ``start_rate_rps`` requests finished per second
(a waiting request starts when a running one frees its slot and KV blocks); all stay 0
(unknown: ``slo-aware`` admits) until the backend first had a queue. ``num_waiting_tokens`` is the prompt tokens of the streams
the proxy sent there that have not had their first token yet. ``kv_capacity_tokens`` is
``num_gpu_blocks x block_size`` from vLLM's ``cache_config_info`` (0 where the engine does not
say: ``prefix-affinity`` then bounds its prefix memory by its own default).
"""

from __future__ import annotations

import asyncio
import logging
import time

from slotune.collector.agent import HttpFetcher, Scrape, make_source, make_target
from slotune.collector.errors import SourceError
from slotune.tuner.fleet.policy import ReplicaState
from slotune.tuner.fleet.route_breaker import BreakerState, CircuitBreaker
from slotune.tuner.fleet.route_config import BackendSpec, BreakerSettings

log = logging.getLogger("slotune.route")
_EWMA = 0.3  # weight of the newest interval in the smoothed prefill rate


class Backend:
    """A backend's circuit breaker, load snapshot and in-flight count."""

    def __init__(self, spec: BackendSpec, breaker: BreakerSettings) -> None:
        self.spec = spec
        self.breaker = CircuitBreaker(breaker.failures, breaker.open_for_s)
        self.in_flight = 0
        self.num_running = 0
        self.num_waiting = 0
        self.kv_usage = 0.0
        self.kv_capacity_tokens = 0
        self.throughput_tps = 0.0
        self.prefill_tps = 0.0
        self.start_rate_rps = 0.0
        self.num_waiting_tokens = 0
        self.num_sent_since_poll = 0  # sent after the last read and not over yet
        self._num_reads = 0
        # (monotonic time, prompt tokens, generated tokens, finished requests) at the last read
        self._last_totals: tuple[float, ...] | None = None

    def state(self) -> BreakerState:
        return self.breaker.state(time.monotonic())

    def can_send(self) -> bool:
        return self.breaker.can_send(time.monotonic())

    def replica_state(self) -> ReplicaState:
        """The load as the policy sees it now."""
        return ReplicaState(
            name=self.spec.name,
            pool=self.spec.pool,
            model=self.spec.model,
            num_running=self.num_running,
            num_waiting=max(
                self.num_waiting + self.num_sent_since_poll, self.in_flight - self.num_running
            ),
            kv_usage=self.kv_usage,
            healthy=self.can_send(),
            throughput_tps=self.throughput_tps,
            num_waiting_tokens=self.num_waiting_tokens,
            prefill_tps=self.prefill_tps,
            start_rate_rps=self.start_rate_rps,
            kv_capacity_tokens=self.kv_capacity_tokens,
        )

    def on_send(self) -> int:
        """A request goes out; returns the read it came after, for :meth:`on_end`."""
        self.in_flight += 1
        self.num_sent_since_poll += 1
        self.breaker.on_send(time.monotonic())
        return self._num_reads

    def on_end(self, sent_after_read: int, *, ok: bool | None) -> None:
        """A request ended: ``ok`` False counts against the circuit, None (client left) neither."""
        self.in_flight -= 1
        if sent_after_read == self._num_reads:
            self.num_sent_since_poll -= 1  # over before any read could have counted it
        if ok is None:
            self.breaker.on_abandoned()
        elif ok:
            self.breaker.on_success()
        else:
            self.on_failure()

    def on_failure(self) -> None:
        before = self.state()
        self.breaker.on_failure(time.monotonic())
        if before is not BreakerState.OPEN and self.state() is BreakerState.OPEN:
            log.warning("backend %s: circuit open (ejected)", self.spec.name)

    def update_load(self, scrape: Scrape, now: float) -> None:
        """Take the running / waiting / KV usage / token rate a scrape reports."""
        values: dict[str, list[float]] = {}
        for fam in scrape.canonical:
            values[fam.name] = [s.value for s in fam.samples]
        was_queued = self._is_queued()
        self.num_running = int(sum(values.get("requests_running", [0.0])))
        self.num_waiting = int(sum(values.get("requests_waiting", [0.0])))
        self.kv_usage = max(values.get("kv_usage", [0.0]), default=0.0)
        self.kv_capacity_tokens = kv_capacity_tokens(scrape) or self.kv_capacity_tokens
        self.num_sent_since_poll = 0
        self._num_reads += 1
        counters = [
            values.get(n) for n in ("prompt_tokens", "generation_tokens", "requests_finished")
        ]
        if any(c is None for c in counters):
            return
        totals = (now, *(sum(c or ()) for c in counters))
        last, self._last_totals = self._last_totals, totals
        if last is None or now <= last[0] or any(t < p for t, p in zip(totals, last, strict=True)):
            return  # the first read, or the engine restarted (its counters reset)
        if not (was_queued and self._is_queued()):
            return  # an engine without a queue all along ran below capacity: no rate from it
        prompt_rate, generated_rate, finished_rate = (
            (t - p) / (now - last[0]) for t, p in zip(totals[1:], last[1:], strict=True)
        )
        self.throughput_tps = _smooth(self.throughput_tps, prompt_rate + generated_rate)
        if prompt_rate > 0:
            self.prefill_tps = _smooth(self.prefill_tps, prompt_rate)
        if finished_rate > 0:
            self.start_rate_rps = _smooth(self.start_rate_rps, finished_rate)

    def _is_queued(self) -> bool:
        # requests waiting, or prompts sent that have not had their first token: with chunked
        # prefill an engine runs a long prompt in pieces and reports it running, not waiting
        return self.num_waiting > 0 or self.num_waiting_tokens > 0

    def queue_prompt(self, num_tokens: int) -> QueuedPrompt:
        """Count a stream's prompt as waiting until :meth:`QueuedPrompt.release` (first token)."""
        self.num_waiting_tokens += num_tokens
        return QueuedPrompt(self, num_tokens)


def kv_capacity_tokens(scrape: Scrape) -> int:
    """Tokens the engine's KV cache holds, from vLLM's ``cache_config_info`` labels (0: unknown)."""
    for family in scrape.raw:
        if family.name == "vllm:cache_config_info":
            for sample in family.samples:
                labels = dict(sample.labels)
                try:
                    return int(labels["num_gpu_blocks"]) * int(labels["block_size"])
                except (KeyError, ValueError):
                    return 0
    return 0


def _smooth(old: float, new: float) -> float:
    """Exponentially weighted mean; the first measurement (old == 0) is taken as is."""
    return new if old == 0.0 else old + _EWMA * (new - old)


class QueuedPrompt:
    """A prompt counted in its backend's ``num_waiting_tokens``; releasing it twice is a no-op."""

    __slots__ = ("_backend", "_num_tokens")

    def __init__(self, backend: Backend, num_tokens: int) -> None:
        self._backend = backend
        self._num_tokens = num_tokens

    def release(self) -> None:
        self._backend.num_waiting_tokens -= self._num_tokens
        self._num_tokens = 0


async def poll_forever(backend: Backend, interval_s: float, timeout_s: float) -> None:
    """Read the backend's ``/metrics`` every ``interval_s`` until cancelled.

    A failed read counts as a failure of the backend (so a dead replica with no traffic is
    still ejected); a good read of an open circuit's backend does not close it, only a
    successful request does.
    """
    spec = backend.spec
    source = make_source(make_target(spec.kind, spec.url, name=spec.name, node="route"))
    async with HttpFetcher(timeout_s=timeout_s) as fetch:
        while True:
            started = time.monotonic()
            try:
                scrape = await source.collect(fetch)
            except SourceError as e:
                if backend.state() is BreakerState.CLOSED:
                    log.warning("backend %s: %s", spec.name, e)
                backend.on_failure()
            else:
                backend.update_load(scrape, time.monotonic())
            await asyncio.sleep(max(0.0, interval_s - (time.monotonic() - started)))
