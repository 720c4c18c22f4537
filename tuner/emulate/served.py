"""What one emulated server shows of its engine: the model card and the metrics.

An engine's face (:mod:`.faces`) builds a :class:`~.app.Served` from these and its route
table; the HTTP app and the server take it as it is, so nothing outside the faces knows which
engine is emulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry

from slotune.tuner.emulate.events import FinishedRequest, StepReport


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
