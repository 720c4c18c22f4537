"""slotune's decision layer: search spaces, trial backends, studies, the engine simulator.

The public surface is listed in ``__all__``; everything else is an implementation detail.
Names are imported on first use (PEP 562), so a process that needs only the simulator or the
emulated engine (``slotune emulate``, started once per trial by the launch backend) does not
load the store, SQLAlchemy and Optuna.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slotune.tuner.backends import (
        Backend,
        BackendKind,
        EngineSession,
        TrialFailed,
        make_backend,
    )
    from slotune.tuner.export import export_config
    from slotune.tuner.objectives import Measurement, ObjectiveKind
    from slotune.tuner.report import study_report
    from slotune.tuner.sampler import SamplerKind
    from slotune.tuner.sim.config import Engine
    from slotune.tuner.space import (
        Param,
        ParamKind,
        SearchSpace,
        default_space,
        engine_defaults,
        space_overrides,
    )
    from slotune.tuner.studies import (
        RunOptions,
        check_study,
        export_study,
        list_studies_report,
        resume_study,
        show_study,
        tune_study,
    )
    from slotune.tuner.study import Progress as StudyProgress
    from slotune.tuner.study import StudySpec

# public name -> (module, attribute)
_LAZY = {
    "Backend": ("slotune.tuner.backends", "Backend"),
    "BackendKind": ("slotune.tuner.backends", "BackendKind"),
    "EngineSession": ("slotune.tuner.backends", "EngineSession"),
    "TrialFailed": ("slotune.tuner.backends", "TrialFailed"),
    "make_backend": ("slotune.tuner.backends", "make_backend"),
    "export_config": ("slotune.tuner.export", "export_config"),
    "Measurement": ("slotune.tuner.objectives", "Measurement"),
    "ObjectiveKind": ("slotune.tuner.objectives", "ObjectiveKind"),
    "study_report": ("slotune.tuner.report", "study_report"),
    "SamplerKind": ("slotune.tuner.sampler", "SamplerKind"),
    "Engine": ("slotune.tuner.sim.config", "Engine"),
    "Param": ("slotune.tuner.space", "Param"),
    "ParamKind": ("slotune.tuner.space", "ParamKind"),
    "SearchSpace": ("slotune.tuner.space", "SearchSpace"),
    "default_space": ("slotune.tuner.space", "default_space"),
    "engine_defaults": ("slotune.tuner.space", "engine_defaults"),
    "space_overrides": ("slotune.tuner.space", "space_overrides"),
    "StudyProgress": ("slotune.tuner.study", "Progress"),
    "StudySpec": ("slotune.tuner.study", "StudySpec"),
    "RunOptions": ("slotune.tuner.studies", "RunOptions"),
    "tune_study": ("slotune.tuner.studies", "tune_study"),
    "check_study": ("slotune.tuner.studies", "check_study"),
    "export_study": ("slotune.tuner.studies", "export_study"),
    "list_studies_report": ("slotune.tuner.studies", "list_studies_report"),
    "resume_study": ("slotune.tuner.studies", "resume_study"),
    "show_study": ("slotune.tuner.studies", "show_study"),
}

__all__ = [
    "Backend",
    "BackendKind",
    "Engine",
    "EngineSession",
    "Measurement",
    "ObjectiveKind",
    "Param",
    "ParamKind",
    "RunOptions",
    "SamplerKind",
    "SearchSpace",
    "StudyProgress",
    "StudySpec",
    "TrialFailed",
    "check_study",
    "default_space",
    "engine_defaults",
    "export_config",
    "export_study",
    "list_studies_report",
    "make_backend",
    "resume_study",
    "show_study",
    "space_overrides",
    "study_report",
    "tune_study",
]


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'slotune.tuner' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
