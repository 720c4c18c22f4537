"""slotune's decision layer: search spaces, trial backends, studies, the engine simulator.

The public surface is listed in ``__all__``; everything else is an implementation detail.
Names are imported on first use (PEP 562), so a process that needs only the simulator or the
emulated engine (``slotune emulate``, started once per trial by the launch backend) does not
load the store, SQLAlchemy and Optuna.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slotune.tuner._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from slotune.collector.vocabulary import Engine
    from slotune.tuner.engines.param import Param, ParamKind
    from slotune.tuner.tune.backends import (
        Backend,
        BackendKind,
        EngineSession,
        TrialFailed,
        make_backend,
    )
    from slotune.tuner.tune.export import export_config
    from slotune.tuner.tune.new_study import new_study_spec
    from slotune.tuner.tune.objectives import Measurement, ObjectiveKind
    from slotune.tuner.tune.report import (
        Infeasibility,
        StudyListing,
        StudyReport,
        TrialReport,
        study_report,
    )
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
        SearchSpace,
        default_space,
        engine_defaults,
        space_overrides,
    )
    from slotune.tuner.tune.study import Progress as StudyProgress
    from slotune.tuner.tune.study import StudySpec

# module -> the names it gives this package on first use
_LAZY: dict[str, tuple[str, ...]] = {
    "slotune.collector.vocabulary": ("Engine",),
    "slotune.tuner.tune.backends": (
        "Backend",
        "BackendKind",
        "EngineSession",
        "TrialFailed",
        "make_backend",
    ),
    "slotune.tuner.tune.export": ("export_config",),
    "slotune.tuner.tune.new_study": ("new_study_spec",),
    "slotune.tuner.tune.objectives": ("Measurement", "ObjectiveKind"),
    "slotune.tuner.tune.report": (
        "Infeasibility",
        "StudyListing",
        "StudyReport",
        "TrialReport",
        "study_report",
    ),
    "slotune.tuner.tune.run": (
        "RunOptions",
        "check_study",
        "export_study",
        "list_studies_report",
        "resume_study",
        "show_study",
        "tune_study",
    ),
    "slotune.tuner.tune.sampler": ("SamplerKind",),
    "slotune.tuner.engines.param": ("Param", "ParamKind"),
    "slotune.tuner.tune.space": (
        "SearchSpace",
        "default_space",
        "engine_defaults",
        "space_overrides",
    ),
    "slotune.tuner.tune.study": ("StudyProgress", "StudySpec"),
}
# the study module's own name, where this package gives it a clearer one
_RENAMED = {"StudyProgress": "Progress"}

__all__ = [
    "Backend",
    "BackendKind",
    "Engine",
    "EngineSession",
    "Infeasibility",
    "Measurement",
    "ObjectiveKind",
    "Param",
    "ParamKind",
    "RunOptions",
    "SamplerKind",
    "SearchSpace",
    "StudyListing",
    "StudyProgress",
    "StudyReport",
    "StudySpec",
    "TrialFailed",
    "TrialReport",
    "check_study",
    "default_space",
    "engine_defaults",
    "export_config",
    "export_study",
    "list_studies_report",
    "make_backend",
    "new_study_spec",
    "resume_study",
    "show_study",
    "space_overrides",
    "study_report",
    "tune_study",
]

# type checkers see only the names imported above, so a misspelt one is an error
if not TYPE_CHECKING:
    __getattr__ = _lazy_names(__name__, _LAZY, _RENAMED)
