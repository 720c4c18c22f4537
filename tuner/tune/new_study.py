"""A new study's spec from what ``slotune tune`` and the dashboard's study form ask.

Both build their :class:`StudySpec` here, so a choice, a trace path or a search-space override
means the same in each. A choice may come as its enum or as its text (a form's select box);
text that is no choice is refused naming the field.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from slotune.collector.errors import ConfigError
from slotune.collector.vocabulary import BackendKind, Engine, ObjectiveKind, SamplerKind
from slotune.tuner.tune.backends.startup import DEFAULT_STARTUP_TIMEOUT_S
from slotune.tuner.tune.space import space_overrides
from slotune.tuner.tune.study import DEFAULT_HEARTBEAT_S, StudySpec

K = TypeVar("K", bound=StrEnum)


def new_study_spec(
    *,
    name: str | None,
    backend: BackendKind | str,
    engine: Engine | str,
    model: str,
    gpu: str,
    workload: str | None,
    trace_file: str | Path | None,
    slos: Sequence[str],
    objective: ObjectiveKind | str = ObjectiveKind.CAPACITY,
    trials: int = 30,
    rate: float | None = None,
    num_requests: int | None = None,
    command: str | None = None,
    endpoint: str | None = None,
    speedup: float = 1.0,
    space_file: Path | None = None,
    params: Sequence[str] = (),
    seed: int = 0,
    sampler: SamplerKind | str = SamplerKind.TPE,
    heartbeat_s: int = DEFAULT_HEARTBEAT_S,
    recheck_k: int = 3,
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
) -> StudySpec:
    """The checked spec of a new study.

    Args:
        name: the study's name; None names it after engine, model, GPU and the time.
        trace_file: a trace file, stored as an absolute path (a study reads it again when
            resumed, from wherever).
        space_file: a search-space YAML file; ``params`` (``NAME=SPEC``) override it.
        The others: the fields of :class:`StudySpec`.

    Raises:
        ConfigError: a choice that is none, a bad override, or a spec that fails
            :meth:`StudySpec.validate`, naming the field.
    """
    engine_kind = _choice("engine", engine, Engine)
    spec = StudySpec(
        name=name if name is not None else _default_name(engine_kind, model, gpu),
        backend=_choice("backend", backend, BackendKind),
        engine=engine_kind,
        model=model,
        gpu=gpu,
        workload=workload,
        trace_file=str(Path(trace_file).resolve()) if trace_file else None,
        slos=tuple(slos),
        objective=_choice("objective", objective, ObjectiveKind),
        trials=trials,
        rate=rate,
        num_requests=num_requests,
        command=command,
        endpoint=endpoint,
        speedup=speedup,
        space=space_overrides(engine_kind, space_file, params),
        seed=seed,
        sampler=_choice("sampler", sampler, SamplerKind),
        heartbeat_s=heartbeat_s,
        recheck_k=recheck_k,
        startup_timeout_s=startup_timeout_s,
    )
    spec.validate()
    return spec


def _default_name(engine: Engine, model: str, gpu: str) -> str:
    return f"{engine}-{model}-{gpu}-{time.strftime('%Y%m%d-%H%M%S')}"


def _choice(field_name: str, value: K | str, kind: type[K]) -> K:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(k.value for k in kind)
        raise ConfigError(f"{field_name} {value!r} is unknown; use one of {allowed}") from None
