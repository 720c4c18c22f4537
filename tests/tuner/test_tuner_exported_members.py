"""The tuner package's public surface, pinned (every other name is an implementation detail)."""

from __future__ import annotations

from enum import StrEnum
from types import ModuleType
from typing import get_args

import slotune.tuner

EXPORTED = [
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


def test_exported_members() -> None:
    assert sorted(slotune.tuner.__all__) == EXPORTED
    for name in EXPORTED:
        value = getattr(slotune.tuner, name)
        assert not isinstance(value, ModuleType), name
        assert getattr(value, "__module__", "").startswith("slotune.tuner."), name
    assert slotune.tuner.StudyProgress.__name__ == "Progress"


def test_cli_choices_match_the_tuner_enums() -> None:
    # The CLI spells the choices out so that building it loads no tuner module.
    from slotune.ui.cli import _options, tune

    def values(enum: type[StrEnum]) -> list[str]:
        return [m.value for m in enum]

    assert list(get_args(_options.EngineName)) == values(slotune.tuner.Engine)
    assert list(get_args(tune.BackendName)) == values(slotune.tuner.BackendKind)
    assert list(get_args(tune.ObjectiveName)) == values(slotune.tuner.ObjectiveKind)
    assert list(get_args(tune.SamplerName)) == values(slotune.tuner.SamplerKind)
