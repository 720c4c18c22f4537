"""What the emulated engine needs from the simulator's engine core, and how it reads it.

The real-time loop drives any object with the shape of :class:`EngineCoreLike` (the
simulator's ``tuner.sim.engine.EngineCore``); its ``stats`` is a frozen
:class:`tuner.sim.engine.EngineStats` snapshot taken after each step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from slotune.tuner.sim.engine import EngineStats


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

    @property
    def started_cached_tokens(self) -> Sequence[int]: ...


class EngineCoreLike(Protocol):
    """The simulator's engine core as the emulated engine drives it."""

    def add_request(self, request: Any) -> None: ...

    def abort(self, request_id: str) -> object: ...

    def step(self, *, with_split: bool = ...) -> StepLike | None:
        """One scheduler step; ``with_split=False`` skips pricing the time split."""
        ...

    def has_unfinished(self) -> bool: ...

    @property
    def stats(self) -> EngineStats: ...
