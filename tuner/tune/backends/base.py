"""The trial-backend contract.

A backend turns an engine configuration into measurements. ``open(config)`` brings up an
engine with that configuration (starts a process, builds a simulator, or checks a running
endpoint) and yields an :class:`EngineSession`; the objective then runs the workload on that
session once or several times (the capacity search tries several rates on one engine), and
leaving the ``with`` block stops whatever ``open`` started, also on errors.

A configuration the engine refuses (bad flag, out of memory, no health in time, crash
mid-run) raises :class:`TrialFailed` with the reason the engine gave; the study records the
trial as infeasible with that reason and goes on. Any other exception is a bug in slotune or
the environment and fails the trial (and is retried, for stale trials of dead workers).

Implementations: ``sim`` (in-process simulator), ``launch`` (engine subprocess from a
command template), ``attach`` (an already running endpoint; the configuration is whatever it
runs).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from slotune.collector.errors import SlotuneError
from slotune.collector.slo import SLO
from slotune.collector.summary import Summary
from slotune.collector.workload import Trace
from slotune.tuner.engines.param import Value


class TrialFailed(SlotuneError):
    """The engine could not be started or measured with this configuration."""


class EngineSession(ABC):
    """An engine brought up with one configuration."""

    @abstractmethod
    def run(self, trace: Trace, slos: Sequence[SLO], seed: int) -> Summary:
        """Serve ``trace`` (arrival times in real-GPU seconds) and summarise it under ``slos``,
        with the run's queue growth (:func:`tuner.tune.steady.with_queue_growth`) in ``queue_growth``.

        Raises:
            TrialFailed: the engine died or stopped answering.
        """

    def engine_metrics(self) -> dict[str, Any]:
        """Server-side figures after the runs (scraped ``/metrics``, simulator counters)."""
        return {}


class Backend(ABC):
    """Brings engines up for trials. One instance per worker process."""

    name: str = ""

    @abstractmethod
    def open(self, config: Mapping[str, Value]) -> AbstractContextManager[EngineSession]:
        """Bring up an engine with ``config``; leaving the block stops it.

        Raises:
            TrialFailed: the engine refused the configuration or did not come up.
        """
