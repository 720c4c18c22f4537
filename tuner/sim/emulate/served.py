"""What one emulated server shows of its engine: the model card, the metrics and the routes.

An engine's face (:mod:`.faces`) builds a :class:`Served`; the HTTP app and the server take
it as it is, so nothing outside the faces knows which engine is emulated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CollectorRegistry

from slotune.tuner.sim.emulate.events import FinishedRequest, StepReport

if TYPE_CHECKING:
    from slotune.tuner.sim.emulate.app import EngineRoutes


@dataclass(frozen=True, slots=True)
class ServedModel:
    """What ``/v1/models`` tells clients about the served model."""

    served_name: str
    root: str
    max_model_len: int
    owned_by: str
    version: str


class Exporter(Protocol):
    """An engine's metrics: fed by the real-time loop, rendered as Prometheus text."""

    @property
    def registry(self) -> CollectorRegistry: ...

    def on_step(self, report: StepReport) -> None: ...

    def on_finished(self, request: FinishedRequest) -> None: ...

    def render(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Served:
    """The engine-specific parts of one emulated server.

    Attributes:
        display_name: the engine as people name it (the start-up log line).
        model: the model card.
        exporter: the metrics, also fed the emulator's lag families.
        routes: the engine's route table, built from the generic handlers.
        middlewares: aiohttp middlewares the engine's server runs (its HTTP metrics).
    """

    display_name: str
    model: ServedModel
    exporter: Exporter
    routes: Callable[[EngineRoutes], Sequence[web.AbstractRouteDef]]
    middlewares: tuple[Middleware, ...] = ()
