"""Measured requests replayed through the simulator, metric by metric."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from slotune.collector.observed import ObservedRequest
from slotune.collector.workload import Trace, TraceRequest
from slotune.tuner.sim.catalog import StepTerms
from slotune.tuner.sim.config import ResolvedConfig
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.simulator import replay_timings


@dataclass(frozen=True, slots=True)
class Requests:
    """One set of measured requests: the trace to replay and the measured values.

    ``measured`` maps ``ttft``, ``tpot``, ``e2e`` to seconds per request (NaN where the
    measurement has none, e.g. TPOT of a one-token reply).
    """

    trace: Trace
    output_tokens: np.ndarray
    measured: dict[str, np.ndarray]

    @property
    def size(self) -> int:
        return len(self.trace.requests)

    def head(self, n: int) -> Requests:
        """The first ``n`` requests (by arrival)."""
        return Requests(
            Trace(self.trace.name, self.trace.requests[:n], self.trace.source),
            self.output_tokens[:n],
            {k: v[:n] for k, v in self.measured.items()},
        )


@dataclass(frozen=True, slots=True)
class Simulated:
    """The simulator's values for each request of a :class:`Requests` (seconds, NaN where
    the simulated engine failed the request); ``wait`` is arrival to first scheduled."""

    ttft: np.ndarray
    tpot: np.ndarray
    e2e: np.ndarray
    wait: np.ndarray

    def metrics(self) -> dict[str, np.ndarray]:
        return {"ttft": self.ttft, "tpot": self.tpot, "e2e": self.e2e}


def requests_of(observed: Sequence[ObservedRequest], name: str) -> Requests:
    """Measured requests as a trace starting at 0 plus their measured values."""
    t0 = observed[0].timestamp_s if observed else 0.0
    trace = Trace(
        name,
        tuple(
            TraceRequest(
                timestamp_s=r.timestamp_s - t0,
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                hash_ids=r.hash_ids,
                block_size=r.block_size,
            )
            for r in observed
        ),
    )
    return Requests(
        trace,
        np.array([r.output_tokens for r in observed], dtype=float),
        {
            "ttft": np.array([r.ttft_ms / 1000.0 for r in observed]),
            "tpot": np.array([np.nan if r.tpot_ms is None else r.tpot_ms / 1000 for r in observed]),
            "e2e": np.array([r.e2e_ms / 1000.0 for r in observed]),
        },
    )


def with_terms(config: ResolvedConfig, terms: StepTerms) -> ResolvedConfig:
    """``config`` with the GPU's step terms replaced."""
    gpu = config.gpu
    efficiency = dataclasses.replace(gpu.efficiency, step_terms=terms)
    return dataclasses.replace(config, gpu=dataclasses.replace(gpu, efficiency=efficiency))


def simulate(config: ResolvedConfig, requests: Requests) -> Simulated:
    """Replay the requests' arrivals and lengths (queueing included) on ``config``."""
    timings = replay_timings(EngineCore.create(config), requests.trace)
    n = requests.size
    ttft, tpot, e2e, wait = (np.full(n, np.nan) for _ in range(4))
    for i, t in enumerate(timings):
        if t.first_token_s is None or t.finished_s is None:
            continue
        ttft[i] = t.first_token_s - t.arrival_s
        e2e[i] = t.finished_s - t.arrival_s
        if t.scheduled_s is not None:
            wait[i] = t.scheduled_s - t.arrival_s
        out = requests.output_tokens[i]
        if out > 1:
            tpot[i] = (t.finished_s - t.first_token_s) / (out - 1)
    return Simulated(ttft, tpot, e2e, wait)
