"""slotune's decision layer: search spaces, trial backends, studies, the engine simulator.

The public surface is listed in ``__all__``; everything else is an implementation detail.
Names are imported on first use (PEP 562), so a process that needs only the simulator or the
emulated engine (``slotune emulate``, started once per trial by the launch backend) does not
load the store, SQLAlchemy and Optuna. (``tune_study`` is ``tuner.tune.tune`` under another
name: the submodule ``tuner.tune`` is an attribute of the package once imported.)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slotune.tuner.backends import Backend, EngineSession, TrialFailed, make_backend
    from slotune.tuner.export import export_config
    from slotune.tuner.objectives import Measurement, ObjectiveKind
    from slotune.tuner.report import study_report
    from slotune.tuner.space import Param, ParamKind, SearchSpace, default_space, engine_defaults
    from slotune.tuner.study import Progress as StudyProgress
    from slotune.tuner.study import StudySpec
    from slotune.tuner.tune import RunOptions, spec_from_options
    from slotune.tuner.tune import export as export_study
    from slotune.tuner.tune import list_all as list_studies_report
    from slotune.tuner.tune import resume as resume_study
    from slotune.tuner.tune import show as show_study
    from slotune.tuner.tune import tune as tune_study

# public name -> (module, attribute)
_LAZY = {
    "Backend": ("slotune.tuner.backends", "Backend"),
    "EngineSession": ("slotune.tuner.backends", "EngineSession"),
    "TrialFailed": ("slotune.tuner.backends", "TrialFailed"),
    "make_backend": ("slotune.tuner.backends", "make_backend"),
    "export_config": ("slotune.tuner.export", "export_config"),
    "Measurement": ("slotune.tuner.objectives", "Measurement"),
    "ObjectiveKind": ("slotune.tuner.objectives", "ObjectiveKind"),
    "study_report": ("slotune.tuner.report", "study_report"),
    "Param": ("slotune.tuner.space", "Param"),
    "ParamKind": ("slotune.tuner.space", "ParamKind"),
    "SearchSpace": ("slotune.tuner.space", "SearchSpace"),
    "default_space": ("slotune.tuner.space", "default_space"),
    "engine_defaults": ("slotune.tuner.space", "engine_defaults"),
    "StudyProgress": ("slotune.tuner.study", "Progress"),
    "StudySpec": ("slotune.tuner.study", "StudySpec"),
    "RunOptions": ("slotune.tuner.tune", "RunOptions"),
    "spec_from_options": ("slotune.tuner.tune", "spec_from_options"),
    "tune_study": ("slotune.tuner.tune", "tune"),
    "export_study": ("slotune.tuner.tune", "export"),
    "list_studies_report": ("slotune.tuner.tune", "list_all"),
    "resume_study": ("slotune.tuner.tune", "resume"),
    "show_study": ("slotune.tuner.tune", "show"),
}

__all__ = [
    "Backend",
    "EngineSession",
    "Measurement",
    "ObjectiveKind",
    "Param",
    "ParamKind",
    "RunOptions",
    "SearchSpace",
    "StudyProgress",
    "StudySpec",
    "TrialFailed",
    "default_space",
    "engine_defaults",
    "export_config",
    "export_study",
    "list_studies_report",
    "make_backend",
    "resume_study",
    "show_study",
    "spec_from_options",
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
