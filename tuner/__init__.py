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
    from tuner.backends import Backend, EngineSession, TrialFailed, make_backend
    from tuner.export import export_config
    from tuner.objectives import Measurement, ObjectiveKind
    from tuner.report import study_report
    from tuner.space import Param, ParamKind, SearchSpace, default_space, engine_defaults
    from tuner.study import Progress as StudyProgress
    from tuner.study import StudySpec
    from tuner.tune import RunOptions, spec_from_options
    from tuner.tune import export as export_study
    from tuner.tune import list_all as list_studies_report
    from tuner.tune import resume as resume_study
    from tuner.tune import show as show_study
    from tuner.tune import tune as tune_study

# public name -> (module, attribute)
_LAZY = {
    "Backend": ("tuner.backends", "Backend"),
    "EngineSession": ("tuner.backends", "EngineSession"),
    "TrialFailed": ("tuner.backends", "TrialFailed"),
    "make_backend": ("tuner.backends", "make_backend"),
    "export_config": ("tuner.export", "export_config"),
    "Measurement": ("tuner.objectives", "Measurement"),
    "ObjectiveKind": ("tuner.objectives", "ObjectiveKind"),
    "study_report": ("tuner.report", "study_report"),
    "Param": ("tuner.space", "Param"),
    "ParamKind": ("tuner.space", "ParamKind"),
    "SearchSpace": ("tuner.space", "SearchSpace"),
    "default_space": ("tuner.space", "default_space"),
    "engine_defaults": ("tuner.space", "engine_defaults"),
    "StudyProgress": ("tuner.study", "Progress"),
    "StudySpec": ("tuner.study", "StudySpec"),
    "RunOptions": ("tuner.tune", "RunOptions"),
    "spec_from_options": ("tuner.tune", "spec_from_options"),
    "tune_study": ("tuner.tune", "tune"),
    "export_study": ("tuner.tune", "export"),
    "list_studies_report": ("tuner.tune", "list_all"),
    "resume_study": ("tuner.tune", "resume"),
    "show_study": ("tuner.tune", "show"),
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
        raise AttributeError(f"module 'tuner' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
