"""The tuner package's public surface, pinned (every other name is an implementation detail)."""

from __future__ import annotations

from types import ModuleType

import slotune.tuner

EXPORTED = [
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


def test_exported_members() -> None:
    assert sorted(slotune.tuner.__all__) == EXPORTED
    for name in EXPORTED:
        value = getattr(slotune.tuner, name)
        assert not isinstance(value, ModuleType), name
        home = getattr(value, "__module__", "")
        # the kinds live in the dependency-free vocabulary the CLI imports
        assert home.startswith("slotune.tuner.") or home == "slotune.collector.vocabulary", name
    assert slotune.tuner.StudyProgress.__name__ == "Progress"
