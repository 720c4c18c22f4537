"""A finding: what a diagnosis found, the numbers behind it, and what to change.

Every analysis (trace, live, workload, simulated) ends in findings of this one shape, so the
command line, the JSON, the store and the dashboard show them alike::

    {"code": "launch-bound", "severity": "warning", "title": "...",
     "evidence": {"host_idle_share": 0.31, ...}, "remedy": "...",
     "parameters": ["enforce_eager", "max_num_seqs"], "tune_command": "slotune tune ..."}

``tune_command`` is a ``slotune tune`` command whose search is restricted to the parameters
that act on the finding (the other parameters of the default space are removed with
``--param NAME=-`` and keep the engine's default); it is None when none of them is tunable.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    OK = "ok"  # healthy: nothing to change
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


# The default vLLM search space of `slotune tune` (tuner/space.py), and the parameters the
# tuner can add to it with --param NAME=choices. Others (async_scheduling) are advice only.
_SEARCHED = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "gpu_memory_utilization",
    "long_prefill_token_threshold",
)
_ADDABLE = {"enforce_eager": "true,false", "tensor_parallel_size": "1,2,4,8"}


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


@dataclass(frozen=True, slots=True)
class TuneContext:
    """The ``slotune tune`` flags that describe what the diagnosis was about (workload,
    model, GPU), put in front of the parameter restriction."""

    flags: tuple[str, ...] = field(default_factory=tuple)


def finding(
    code: str,
    severity: Severity,
    title: str,
    evidence: dict[str, Any],
    remedy: str,
    parameters: Sequence[str] = (),
    context: TuneContext | None = None,
) -> Finding:
    """A finding whose tune command is derived from its parameters."""
    return Finding(
        code=code,
        severity=severity,
        title=title,
        evidence=evidence,
        remedy=remedy,
        parameters=tuple(parameters),
        tune_command=tune_command(parameters, context or TuneContext()),
    )


def tune_command(parameters: Sequence[str], context: TuneContext) -> str | None:
    """``slotune tune`` searching only ``parameters`` (None when the tuner can tune none)."""
    tunable = [p for p in parameters if p in _SEARCHED or p in _ADDABLE]
    if not tunable:
        return None
    args = ["slotune", "tune", *context.flags]
    for name in _SEARCHED:
        if name not in tunable:
            args += ["--param", f"{name}=-"]
    for name in tunable:
        if name in _ADDABLE:
            args += ["--param", f"{name}={_ADDABLE[name]}"]
    return shlex.join(args)
