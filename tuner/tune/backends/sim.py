"""The ``sim`` backend: the in-process engine simulator (hundreds of trials in minutes)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from slotune.collector.errors import EngineConfigError
from slotune.collector.slo import SLO
from slotune.collector.summary import Summary
from slotune.collector.workload import Trace
from slotune.tuner.engines.param import Value
from slotune.tuner.sim import simulate
from slotune.tuner.sim.config import EngineConfig, config_from_params, resolve
from slotune.tuner.tune.backends.base import Backend, EngineSession, TrialFailed
from slotune.tuner.tune.steady import with_queue_growth


class SimSession(EngineSession):
    """A simulated engine: each run replays the trace on a fresh simulator."""

    def __init__(self, config: EngineConfig) -> None:
        self._config = config
        self._last_engine: dict[str, Any] = {}

    def run(self, trace: Trace, slos: Sequence[SLO], seed: int) -> Summary:
        try:
            result = simulate(self._config, trace, slos=tuple(slos), seed=seed)
        except EngineConfigError as e:  # e.g. no memory left for the KV cache
            raise TrialFailed(f"engine failed to start: {e}") from e
        engine = result.summary.engine
        self._last_engine = {} if engine is None else engine.to_dict()
        return with_queue_growth(result.summary, result.records)

    def engine_metrics(self) -> dict[str, Any]:
        return self._last_engine


class SimBackend(Backend):
    """Simulates ``engine`` serving ``model`` on ``gpu``."""

    name = "sim"

    def __init__(self, engine: str, model: str, gpu: str) -> None:
        self.engine, self.model, self.gpu = engine, model, gpu

    @contextmanager
    def open(self, config: Mapping[str, Value]) -> Iterator[EngineSession]:
        engine_config = config_from_params(self.engine, self.model, self.gpu, config)
        try:
            resolve(engine_config)
        except EngineConfigError as e:
            raise TrialFailed(f"engine refused the configuration: {e}") from e
        yield SimSession(engine_config)
