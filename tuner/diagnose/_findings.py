"""A finding: what a diagnosis found, the numbers behind it, and what to change.

Every analysis (trace, live, workload, simulated) ends in findings of this one shape, so the
command line, the JSON, the store and the dashboard show them alike::

    {"code": "launch-bound", "severity": "warning", "title": "...",
     "evidence": {"host_idle_share": 0.31, ...}, "remedy": "...",
     "parameters": ["enforce_eager", "max_num_seqs"], "tune_command": "slotune tune ..."}

``tune_command`` is a ``slotune tune`` command whose search is restricted to the parameters
that act on the finding (the other parameters of the default space are removed with
``--param NAME=-`` and keep the engine's default); it is None when none of them is tunable.
It names the SLOs to tune against (the diagnosis's ``--slo``, else :data:`DEFAULT_TUNE_SLOS`),
so with a workload in the context it runs as printed.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from slotune.tuner.engines.base import EngineAdapter, Knob
from slotune.tuner.engines.registry import DEFAULT_ENGINE, adapter_for, adapters


class Severity(StrEnum):
    OK = "ok"  # healthy: nothing to change
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


# Knobs the tuner can add to its default space with --param NAME=choices, where the engine
# has them; other parameters (async_scheduling) are advice only.
_ADDABLE = {Knob.EAGER: "true,false", Knob.TENSOR_PARALLEL: "1,2,4,8"}


def _engine_name(name: str, target: EngineAdapter) -> str:
    """A rule's parameter (any engine's name for a knob) as ``target`` names that knob;
    a parameter that is no engine's knob, or a knob ``target`` lacks, stays as it is."""
    for adapter in adapters():
        for knob, knob_name in adapter.knob_names.items():
            if knob_name == name:
                return target.knob_names.get(knob, name)
    return name


@dataclass(frozen=True, slots=True)
class Finding:
    """One diagnosis result with its evidence and the action it calls for.

    Attributes:
        code: stable identifier (``launch-bound``, ``kv-bound``, ``prefix-caching-helps``, …).
        evidence: the numbers the finding rests on, named with units.
        parameters: engine parameters (the engine's own names) that act on it.
        tune_command: ready ``slotune tune`` command restricted to ``parameters``.
    """

    code: str
    severity: Severity
    title: str
    evidence: dict[str, Any]
    remedy: str
    parameters: tuple[str, ...] = ()
    tune_command: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "title": self.title,
            "evidence": dict(self.evidence),
            "remedy": self.remedy,
            "parameters": list(self.parameters),
            "tune_command": self.tune_command,
        }


# What a tune command tunes against when the diagnosis was given no --slo: the interactive
# chat SLOs of the demo and the docs' examples.
DEFAULT_TUNE_SLOS = ("ttft:p99<=500ms", "itl:p99<=50ms")


@dataclass(frozen=True, slots=True)
class TuneContext:
    """The ``slotune tune`` flags that describe what the diagnosis was about (workload,
    model, GPU), put in front of the parameter restriction, and the SLOs to tune against."""

    flags: tuple[str, ...] = field(default_factory=tuple)
    engine: str = DEFAULT_ENGINE
    slos: tuple[str, ...] = DEFAULT_TUNE_SLOS


def finding(
    code: str,
    severity: Severity,
    title: str,
    evidence: dict[str, Any],
    remedy: str,
    parameters: Sequence[str] = (),
    context: TuneContext | None = None,
) -> Finding:
    """A finding whose parameters are named as ``context``'s engine names them, with the tune
    command derived from them."""
    context = context or TuneContext()
    target = adapter_for(context.engine)
    names = tuple(_engine_name(p, target) for p in parameters)
    return Finding(
        code=code,
        severity=severity,
        title=title,
        evidence=evidence,
        remedy=remedy,
        parameters=names,
        tune_command=tune_command(names, context),
    )


def tune_command(parameters: Sequence[str], context: TuneContext) -> str | None:
    """``slotune tune`` searching only ``parameters`` (None when the tuner can tune none)."""
    adapter = adapter_for(context.engine)
    # The parameters `slotune tune` searches by default for the engine.
    searched = {p.name for p in adapter.default_params()}
    knob_names = adapter.knob_names
    addable = {knob_names[k]: choices for k, choices in _ADDABLE.items() if k in knob_names}
    tunable = [p for p in parameters if p in searched or p in addable]
    if not tunable:
        return None
    args = ["slotune", "tune", *context.flags]
    for slo in context.slos:
        args += ["--slo", slo]
    for name in searched:
        if name not in tunable:
            args += ["--param", f"{name}=-"]
    for name in tunable:
        if name in addable:
            args += ["--param", f"{name}={addable[name]}"]
    return shlex.join(args)
