"""slotune's decision layer: search spaces, trial backends, studies, the engine simulator.

The public surface is listed in ``__all__``; everything else is an implementation detail.
"""

from tuner.backends import Backend, EngineSession, TrialFailed, make_backend
from tuner.export import export_config
from tuner.objectives import Measurement, ObjectiveKind
from tuner.report import study_report
from tuner.space import Param, ParamKind, SearchSpace, default_space, engine_defaults
from tuner.study import Progress as StudyProgress
from tuner.study import StudySpec
from tuner.tune import RunOptions, spec_from_options, tune
from tuner.tune import export as export_study
from tuner.tune import list_all as list_studies_report
from tuner.tune import resume as resume_study
from tuner.tune import show as show_study

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
    "tune",
]
