"""Waiting for a launched engine to serve, by following its log.

A first start of vLLM can take half an hour on a loaded machine (torch.compile of every
shape), a start with ``--enforce-eager`` about a minute on two CPU cores, SGLang minutes on a
large model (weights, then CUDA-graph capture), the emulated engine a second. So the wait has
one generous limit (:data:`DEFAULT_STARTUP_TIMEOUT_S`, the ``--startup-timeout`` of ``slotune
tune``) and tells the phases apart as the engine's log reaches them: a failure or a timeout
names the phase the engine was in and shows its last log lines, so "still compiling after an
hour" and "died loading the weights" read differently.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

# 26 minutes were measured for a first torch.compile of a tiny model on two busy cores.
DEFAULT_STARTUP_TIMEOUT_S = 3600.0
POLL_S = 0.2
LAST_LINES = 3

# (phase, log pattern), in the order an engine goes through them, one table for every engine:
# vLLM's and SGLang's own wording (SGLang: "Load weight begin", "KV Cache is allocated",
# "Capture cuda graph begin", then uvicorn, then "The server is fired up and ready to roll!"
# after its warm-up request); TensorRT-LLM and the emulated engine match where they print
# something alike. A phase an engine skips (SGLang compiles nothing by default) is not shown.
_PHASES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "loading the model",
        re.compile(r"load(ing)? (the )?model|Loading weights|checkpoint shards|Load weight begin"),
    ),
    # Not "torch.compile" alone: with --enforce-eager vLLM says it is "disabling torch.compile".
    (
        "compiling",
        re.compile(
            r"torch\.compile takes|Compiling a graph|Dynamo bytecode transform|Start compiling"
        ),
    ),
    (
        "allocating the KV cache",
        re.compile(r"KV Cache is allocated|Memory pool end|GPU KV cache size"),
    ),
    (
        "capturing graphs",
        re.compile(
            r"Capturing CUDA graph|cudagraph capturing|Capture (piecewise )?cuda graph begin",
            re.IGNORECASE,
        ),
    ),
    (
        "starting the server",
        re.compile(r"Starting vLLM (API )?server|Uvicorn running|Started server"),
    ),
    ("serving", re.compile(r"Application startup complete|fired up and ready to roll")),
)


@dataclass(frozen=True, slots=True)
class StartupProgress:
    """How far an engine's start got.

    Attributes:
        phase: the latest phase its log reached ("starting" before any).
        elapsed_s: seconds since the process was started.
        phase_at_s: phase -> seconds after the start when the log first reached it.
    """

    phase: str
    elapsed_s: float
    phase_at_s: dict[str, float]


class LogFollower:
    """Reads a growing log file and records when each start-up phase first appears."""

    def __init__(self, read_text: Callable[[], str], started_at: float) -> None:
        self._read, self._t0 = read_text, started_at
        self.phase_at_s: dict[str, float] = {}

    def poll(self) -> StartupProgress:
        """Read the log again and return the progress so far."""
        now = time.monotonic() - self._t0
        text = self._read()
        for phase, pattern in _PHASES:
            if phase not in self.phase_at_s and pattern.search(text):
                self.phase_at_s[phase] = round(now, 1)
        return StartupProgress(self.phase, round(now, 1), dict(self.phase_at_s))

    @property
    def phase(self) -> str:
        reached = [p for p, _ in _PHASES if p in self.phase_at_s]
        return reached[-1] if reached else "starting"


def last_lines(log_text: str, n: int = LAST_LINES) -> str:
    """The last ``n`` non-empty lines of a log, joined on one line with `` | ``."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) if lines else "no output"
