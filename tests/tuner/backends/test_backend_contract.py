"""The contract of :class:`~tuner.tune.backends.base.Backend`, run on every registered backend.

One suite over ``tuner.tune.backends.BACKENDS``: a backend's spec comes from :data:`SPEC_FIELDS`
(what that backend needs to be built), which must name every registered backend.
"""

from __future__ import annotations

import dataclasses

import pytest
from _tools import SLOTUNE, free_port

from slotune.collector.errors import ConfigError
from slotune.collector.vocabulary import BackendKind, Engine
from slotune.tuner.tune.backends import BACKENDS, Backend, TrialFailed, make_backend
from slotune.tuner.tune.study import StudySpec

# The emulated engine, started as the launch backend starts a real one.
EMULATE = f"{SLOTUNE} emulate --model {{model}} --gpu {{gpu}} --port {{port}} --speedup 10 {{engine_args}}"
SPEC_FIELDS: dict[BackendKind, dict[str, object]] = {
    BackendKind.SIM: {},
    BackendKind.LAUNCH: {"command": EMULATE, "startup_timeout_s": 120.0},
    BackendKind.ATTACH: {"endpoint": f"http://127.0.0.1:{free_port()}"},  # nothing listens
}
# vLLM refuses a memory fraction above 1 (the simulator, the emulator and a real server alike)
REFUSED = {"gpu_memory_utilization": 1.5}


def spec(kind: BackendKind) -> StudySpec:
    return StudySpec(
        name=f"contract-{kind}",
        backend=kind,
        engine=Engine.VLLM,
        model="llama-3.1-8b",
        gpu="h100-sxm",
        workload="azure-conv",
        trace_file=None,
        slos=("ttft:p99<=5s",),
        **SPEC_FIELDS[kind],  # type: ignore[arg-type]
    )


def test_every_backend_kind_is_registered_and_has_its_spec() -> None:
    assert set(BACKENDS) == set(BackendKind) == set(SPEC_FIELDS)


@pytest.mark.parametrize("kind", list(BACKENDS), ids=str)
def test_a_spec_gets_the_backend_it_names(kind: BackendKind) -> None:
    backend = make_backend(spec(kind))
    assert isinstance(backend, Backend) and backend.name == kind.value


@pytest.mark.parametrize("kind", list(BACKENDS), ids=str)
def test_an_engine_that_does_not_come_up_fails_the_trial_only(kind: BackendKind) -> None:
    backend = make_backend(spec(kind))
    with pytest.raises(TrialFailed), backend.open(REFUSED):
        pytest.fail("the engine came up with a configuration it refuses")


def test_an_unknown_backend_is_one_clear_error() -> None:
    bad = dataclasses.replace(spec(BackendKind.SIM), backend="cloud")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--backend 'cloud': use one of sim, launch, attach"):
        make_backend(bad)
