"""Trial backends: ``sim`` (simulator), ``launch`` (engine subprocess), ``attach`` (endpoint).

Adding a backend is its module plus one factory line in :data:`BACKENDS`; each factory
imports its module on first use, so importing this package loads no backend's libraries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from slotune.collector.errors import ConfigError
from slotune.collector.vocabulary import BackendKind as BackendKind
from slotune.collector.vocabulary import Engine
from slotune.tuner.tune.backends.base import Backend, EngineSession, TrialFailed
from slotune.tuner.tune.gpu_slots import GpuSlot


class BackendSpec(Protocol):
    """What a backend is built from: the fields of a study's spec it reads
    (:class:`~tuner.tune.study.StudySpec` has them all)."""

    @property
    def backend(self) -> BackendKind: ...
    @property
    def engine(self) -> Engine: ...
    @property
    def model(self) -> str: ...
    @property
    def gpu(self) -> str: ...
    @property
    def launch_command(self) -> str: ...
    @property
    def speedup(self) -> float: ...
    @property
    def startup_timeout_s(self) -> float: ...
    @property
    def endpoint(self) -> str | None: ...


def _sim(spec: BackendSpec, slot: GpuSlot | None) -> Backend:
    from slotune.tuner.tune.backends.sim import SimBackend

    return SimBackend(spec.engine, spec.model, spec.gpu)


def _launch(spec: BackendSpec, slot: GpuSlot | None) -> Backend:
    from slotune.tuner.tune.backends.launch import LaunchBackend

    return LaunchBackend(
        spec.launch_command,
        engine=spec.engine,
        model=spec.model,
        gpu=spec.gpu,
        speedup=spec.speedup,
        slot=slot or GpuSlot(()),
        startup_timeout_s=spec.startup_timeout_s,
    )


def _attach(spec: BackendSpec, slot: GpuSlot | None) -> Backend:
    from slotune.tuner.tune.backends.attach import AttachBackend

    if spec.endpoint is None:
        raise ConfigError("--backend attach needs --endpoint http://host:port")
    return AttachBackend(spec.endpoint, engine=spec.engine, model=spec.model, gpu=spec.gpu)


# kind -> builds the backend of a study's spec for one worker (its GPU slot)
BACKENDS: dict[BackendKind, Callable[[BackendSpec, GpuSlot | None], Backend]] = {
    BackendKind.SIM: _sim,
    BackendKind.LAUNCH: _launch,
    BackendKind.ATTACH: _attach,
}


def make_backend(spec: BackendSpec, slot: GpuSlot | None = None) -> Backend:
    """The backend a study's spec names, for one worker (``slot``: its GPUs)."""
    factory = BACKENDS.get(spec.backend)
    if factory is None:
        names = ", ".join(b.value for b in BACKENDS)
        raise ConfigError(f"--backend {spec.backend!r}: use one of {names}")
    return factory(spec, slot)


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendKind",
    "BackendSpec",
    "EngineSession",
    "TrialFailed",
    "make_backend",
]
