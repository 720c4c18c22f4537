"""Trial backends: ``sim`` (simulator), ``launch`` (engine subprocess), ``attach`` (endpoint)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slotune.collector.errors import ConfigError
from slotune.collector.vocabulary import BackendKind as BackendKind
from slotune.tuner.backends.base import Backend, EngineSession, TrialFailed
from slotune.tuner.gpu_slots import GpuSlot

if TYPE_CHECKING:
    from slotune.tuner.study import StudySpec


def make_backend(spec: StudySpec, slot: GpuSlot | None = None) -> Backend:
    """The backend a study's spec names, for one worker (``slot``: its GPUs)."""
    if spec.backend is BackendKind.SIM:
        from slotune.tuner.backends.sim import SimBackend

        return SimBackend(spec.engine, spec.model, spec.gpu)
    if spec.backend is BackendKind.LAUNCH:
        from slotune.tuner.backends.launch import LaunchBackend

        return LaunchBackend(
            spec.launch_command,
            engine=spec.engine,
            model=spec.model,
            gpu=spec.gpu,
            speedup=spec.speedup,
            slot=slot or GpuSlot(()),
            startup_timeout_s=spec.startup_timeout_s,
        )
    if spec.backend is BackendKind.ATTACH:
        from slotune.tuner.backends.attach import AttachBackend

        assert spec.endpoint is not None
        return AttachBackend(spec.endpoint, engine=spec.engine, model=spec.model, gpu=spec.gpu)
    names = ", ".join(b.value for b in BackendKind)
    raise ConfigError(f"--backend {spec.backend!r}: use one of {names}")


__all__ = ["Backend", "BackendKind", "EngineSession", "TrialFailed", "make_backend"]
