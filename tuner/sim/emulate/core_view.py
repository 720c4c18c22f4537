"""What the emulated engine needs from the simulator's engine core, and how it reads it.

The real-time loop drives any object with the shape of :class:`EngineCoreLike` (the
simulator's ``tuner.sim.engine.EngineCore``); reading its statistics goes through
:func:`read_counters` alone, so the HTTP layer never depends on the core's field names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class StepLike(Protocol):
    """One scheduler step: how long it took on the emulated GPU and what it produced.

    ``started`` lists the requests scheduled for the first time in this step.
    """

    @property
    def duration_s(self) -> float: ...

    @property
    def tokens(self) -> Sequence[tuple[str, int]]: ...

    @property
    def finished(self) -> Sequence[str]: ...

    @property
    def preempted(self) -> Sequence[str]: ...

    @property
    def started(self) -> Sequence[str]: ...


class EngineCoreLike(Protocol):
    """The simulator's engine core as the emulated engine drives it."""

    def add_request(self, request: Any) -> None: ...

    def abort(self, request_id: str) -> object: ...

    def step(self, *, with_split: bool = ...) -> StepLike | None:
        """One scheduler step; ``with_split=False`` skips pricing the time split."""
        ...

    def has_unfinished(self) -> bool: ...

    @property
    def stats(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class EngineCounters:
    """A snapshot of the core's gauges and cumulative counters."""

    num_running: int
    num_waiting: int
    kv_usage: float
    prefix_queries: int
    prefix_hits: int
    preemptions: int
    prompt_tokens: int
    generation_tokens: int
    kv_blocks: int
    kv_tokens: int

    @property
    def block_size(self) -> int:
        return self.kv_tokens // self.kv_blocks if self.kv_blocks else 0


def read_counters(stats: Any) -> EngineCounters:
    """Snapshot the core's ``stats`` object."""
    return EngineCounters(
        num_running=int(stats.num_running),
        num_waiting=int(stats.num_waiting),
        kv_usage=float(stats.kv_usage),
        prefix_queries=int(stats.prefix_queries),
        prefix_hits=int(stats.prefix_hits),
        preemptions=int(stats.preemptions),
        prompt_tokens=int(stats.prompt_tokens),
        generation_tokens=int(stats.generation_tokens),
        kv_blocks=int(stats.kv_blocks),
        kv_tokens=int(stats.kv_tokens),
    )
