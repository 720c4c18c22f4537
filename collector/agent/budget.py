"""The budget of one scrape, and where a scrape's CPU work runs.

The agent gives every scrape of a target its ``scrape_timeout`` and ``body_size_limit``
(Prometheus' names and meanings) as a :class:`ScrapeBudget`, set for the task that scrapes it
(a context variable, so sources need no extra argument and worker threads see it too).
Fetching honours both; parsing and mapping run in a worker thread through :func:`off_loop`
and stop at the deadline. So a target serving a body that is slow to read is marked failed
with that reason, and the event loop goes on scraping every other target meanwhile, as
Prometheus' scrape loops do.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

# Largest body a scrape reads unless a target sets its own body_size_limit: a node with many
# GPUs exposes a few megabytes.
DEFAULT_BODY_SIZE_LIMIT = 64 << 20

_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ScrapeBudget:
    """What one scrape of one target may spend.

    Attributes:
        timeout_s: the target's scrape timeout (fetch, parse and mapping together).
        deadline: the ``time.monotonic()`` instant the scrape must end by.
        max_body_bytes: the largest body read from one URL.
    """

    timeout_s: float
    deadline: float
    max_body_bytes: int = DEFAULT_BODY_SIZE_LIMIT

    def remaining_s(self) -> float:
        """Seconds left until the deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())


_BUDGET: ContextVar[ScrapeBudget | None] = ContextVar("slotune_scrape_budget", default=None)


@contextlib.contextmanager
def scrape_budget(
    timeout_s: float, max_body_bytes: int = DEFAULT_BODY_SIZE_LIMIT
) -> Iterator[ScrapeBudget]:
    """Run the enclosed scrape under a budget starting now."""
    budget = ScrapeBudget(timeout_s, time.monotonic() + timeout_s, max_body_bytes)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def current_budget() -> ScrapeBudget | None:
    """The budget of the scrape in progress (None outside the agent: tests, imports)."""
    return _BUDGET.get()


def current_deadline() -> float | None:
    """The deadline of the scrape in progress, if any."""
    budget = _BUDGET.get()
    return budget.deadline if budget else None


async def off_loop(fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """Run CPU work of a scrape in a worker thread, with the scrape's budget visible there."""
    return await asyncio.to_thread(fn, *args, **kwargs)
