"""Trial backends: ``sim`` (simulator), ``launch`` (engine subprocess), ``attach`` (endpoint)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slotune.collector.errors import ConfigError
from slotune.tuner.backends.base import Backend, EngineSession, TrialFailed
from slotune.tuner.gpu_slots import GpuSlot

if TYPE_CHECKING:
    from slotune.tuner.study import StudySpec

BACKENDS = ("sim", "launch", "attach")


def make_backend(spec: StudySpec, slot: GpuSlot | None = None) -> Backend:
    """The backend a study's spec names, for one worker (``slot``: its GPUs)."""
    if spec.backend == "sim":
        from slotune.tuner.backends.sim import SimBackend

        return SimBackend(spec.engine, spec.model, spec.gpu)
    if spec.backend == "launch":
        from slotune.tuner.backends.launch import LaunchBackend

        assert spec.command is not None  # StudySpec.validate
        return LaunchBackend(
            spec.command,
            engine=spec.engine,
            model=spec.model,
            gpu=spec.gpu,
            time_scale=spec.time_scale,
            slot=slot or GpuSlot(()),
        )
    if spec.backend == "attach":
        from slotune.tuner.backends.attach import AttachBackend

        assert spec.endpoint is not None
        return AttachBackend(spec.endpoint, engine=spec.engine, model=spec.model)
    raise ConfigError(f"--backend {spec.backend!r}: use one of {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "Backend", "EngineSession", "TrialFailed", "make_backend"]
