"""vLLM's periodic engine log line, written every ``interval_s`` while the engine is busy.

``Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 1530.2
tokens/s, Running: 12 reqs, Waiting: 0 reqs, GPU KV cache usage: 7.3%, Prefix cache hit
rate: 41.0%`` -- the same fields as vLLM's ``LoggingStatLogger``; an idle engine logs nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time

from slotune.tuner.emulate.events import FinishedRequest, StepReport


class StatsLog:
    """Accumulates steps and logs throughput, queue and cache figures periodically."""

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0) -> None:
        self._log = logger
        self._interval_s = interval_s
        self._prompt_tokens = 0
        self._generation_tokens = 0
        self._last: StepReport | None = None
        self._since = time.monotonic()

    def on_step(self, report: StepReport) -> None:
        self._prompt_tokens += report.prompt_tokens
        self._generation_tokens += report.generation_tokens
        self._last = report

    def on_finished(self, request: FinishedRequest) -> None:
        """Requests are not logged one by one."""

    def flush(self) -> None:
        """Log the figures since the previous call (nothing when there was no work)."""
        now = time.monotonic()
        elapsed = max(now - self._since, 1e-9)
        last = self._last
        if last is not None and (self._prompt_tokens or self._generation_tokens):
            c = last.counters
            hit_rate = c.prefix_hits / c.prefix_queries if c.prefix_queries else 0.0
            self._log.info(
                "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: "
                "%.1f tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, "
                "Prefix cache hit rate: %.1f%%",
                self._prompt_tokens / elapsed,
                self._generation_tokens / elapsed,
                c.requests_running,
                c.requests_waiting,
                c.kv_usage * 100,
                hit_rate * 100,
            )
        self._prompt_tokens = self._generation_tokens = 0
        self._since = now

    async def run(self) -> None:
        """Call :meth:`flush` every ``interval_s`` until cancelled."""
        while True:
            await asyncio.sleep(self._interval_s)
            self.flush()
