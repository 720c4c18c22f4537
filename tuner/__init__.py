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
    from slotune.collector.vocabulary import Engine
    from slotune.tuner.tune.backends import (
        Backend,
        BackendKind,
        EngineSession,
        TrialFailed,
        make_backend,
    )
    from slotune.tuner.tune.export import export_config
    from slotune.tuner.tune.objectives import Measurement, ObjectiveKind
    from slotune.tuner.tune.report import study_report
    from slotune.tuner.tune.run import (
        RunOptions,
        check_study,
        export_study,
        list_studies_report,
        resume_study,
        show_study,
        tune_study,
    )
    from slotune.tuner.tune.sampler import SamplerKind
    from slotune.tuner.tune.space import (
        Param,
        ParamKind,
        SearchSpace,
        default_space,
        engine_defaults,
        space_overrides,
    )
    from slotune.tuner.tune.study import Progress as StudyProgress
    from slotune.tuner.tune.study import StudySpec

# public name -> (module, attribute)
_LAZY = {
    "Backend": ("slotune.tuner.tune.backends", "Backend"),
    "BackendKind": ("slotune.tuner.tune.backends", "BackendKind"),
    "EngineSession": ("slotune.tuner.tune.backends", "EngineSession"),
    "TrialFailed": ("slotune.tuner.tune.backends", "TrialFailed"),
    "make_backend": ("slotune.tuner.tune.backends", "make_backend"),
    "export_config": ("slotune.tuner.tune.export", "export_config"),
    "Measurement": ("slotune.tuner.tune.objectives", "Measurement"),
    "ObjectiveKind": ("slotune.tuner.tune.objectives", "ObjectiveKind"),
    "study_report": ("slotune.tuner.tune.report", "study_report"),
    "SamplerKind": ("slotune.tuner.tune.sampler", "SamplerKind"),
    "Engine": ("slotune.collector.vocabulary", "Engine"),
    "Param": ("slotune.tuner.tune.space", "Param"),
    "ParamKind": ("slotune.tuner.tune.space", "ParamKind"),
    "SearchSpace": ("slotune.tuner.tune.space", "SearchSpace"),
    "default_space": ("slotune.tuner.tune.space", "default_space"),
    "engine_defaults": ("slotune.tuner.tune.space", "engine_defaults"),
    "space_overrides": ("slotune.tuner.tune.space", "space_overrides"),
    "StudyProgress": ("slotune.tuner.tune.study", "Progress"),
    "StudySpec": ("slotune.tuner.tune.study", "StudySpec"),
    "RunOptions": ("slotune.tuner.tune.run", "RunOptions"),
    "tune_study": ("slotune.tuner.tune.run", "tune_study"),
    "check_study": ("slotune.tuner.tune.run", "check_study"),
    "export_study": ("slotune.tuner.tune.run", "export_study"),
    "list_studies_report": ("slotune.tuner.tune.run", "list_studies_report"),
    "resume_study": ("slotune.tuner.tune.run", "resume_study"),
    "show_study": ("slotune.tuner.tune.run", "show_study"),
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
