"""The simulator package's deliberate public surface (httpx-style pin)."""

from __future__ import annotations

import slotune.tuner.sim

EXPECTED = {
    "TRTLLM_FLAGS_HELP",
    "VLLM_FLAGS_HELP",
    "Engine",
    "EngineConfig",
    "EngineCore",
    "EngineSeries",
    "EngineStats",
    "ProgressCallback",
    "RequestRejected",
    "RequestTiming",
    "ResolvedConfig",
    "ResolvedTrtllm",
    "ResolvedVllm",
    "SimRequest",
    "SimResult",
    "StepBreakdown",
    "StepResult",
    "TrtllmConfig",
    "VllmConfig",
    "WorkloadChoice",
    "config_from_params",
    "extra_llm_api_options",
    "launch_command",
    "load_workload",
    "parse_engine_flags",
    "resolve",
    "simulate",
    "simulate_flags",
    "to_argv",
    "trace_requests",
}


def test_public_surface_is_pinned() -> None:
    assert set(slotune.tuner.sim.__all__) == EXPECTED
    for name in EXPECTED:
        assert getattr(slotune.tuner.sim, name) is not None
