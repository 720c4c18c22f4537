"""Trace findings: each cause gives its finding, with evidence, parameters and a tune command
that `slotune tune` itself accepts."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from trace_builder import TraceBuilder

from slotune.tuner.diagnose import Finding, TuneContext, diagnose_trace
from slotune.tuner.tune.space import Engine, check_overrides, engine_defaults, space_overrides


def _codes(findings: tuple[Finding, ...]) -> list[str]:
    return [f.code for f in findings]


def _accepted_by_tune(command: str) -> None:
    args = shlex.split(command)
    assert args[:2] == ["slotune", "tune"]
    params = [args[i + 1] for i, a in enumerate(args) if a == "--param"]
    overrides = space_overrides(Engine.VLLM, None, params)
    defaults = engine_defaults(Engine.VLLM, "llama-3.1-8b", "h100-sxm", max_model_len=4096)
    check_overrides(Engine.VLLM, overrides, defaults)


def test_compute_dominant_trace_is_healthy(tmp_path: Path) -> None:
    t = TraceBuilder()
    for i in range(10):
        t.launch(i * 100, 5, [(i * 100 + 10, 95)])
    d = diagnose_trace(t.write(tmp_path / "t.json"))
    assert _codes(d.findings) == ["compute-bound"]
    assert d.findings[0].severity.value == "ok"
    assert d.findings[0].tune_command is None


def test_transfer_dominant_trace(tmp_path: Path) -> None:
    t = TraceBuilder()
    for i in range(5):
        t.launch(
            i * 100,
            5,
            [(i * 100 + 10, 60)],
            name="cudaMemcpyAsync",
            kernel="Memcpy DtoH (Device -> Pinned)",
            cat="gpu_memcpy",
            nbytes=1e6,
        )
        t.launch(i * 100 + 6, 5, [(i * 100 + 70, 35)])
    d = diagnose_trace(t.write(tmp_path / "t.json"))
    assert _codes(d.findings)[0] == "transfer-bound"
    f = d.findings[0]
    assert f.evidence["exposed_DtoH_ms"] == 0.3
    assert set(f.parameters) == {"max_num_seqs", "max_num_batched_tokens"}
    assert f.tune_command is not None
    _accepted_by_tune(f.tune_command)


def test_launch_bound_trace_of_tiny_kernels(tmp_path: Path) -> None:
    t = TraceBuilder()
    for i in range(50):
        # the CPU needs 20 µs per launch, each kernel runs 4 µs
        t.launch(i * 20, 18, [(i * 20 + 19, 4)], kernel="vectorized_elementwise_kernel")
    context = TuneContext(("--model", "llama-3.1-8b", "--workload", "azure-conv"))
    d = diagnose_trace(t.write(tmp_path / "t.json"), context=context)
    assert "launch-bound" in _codes(d.findings)
    f = next(f for f in d.findings if f.code == "launch-bound")
    assert f.evidence["short_kernel_busy_share"] == 1.0
    assert f.evidence["host_idle_share"] > 0.5
    assert "enforce_eager" in f.parameters and "async_scheduling" in f.parameters
    assert f.tune_command is not None
    assert f.tune_command.startswith("slotune tune --model llama-3.1-8b --workload azure-conv")
    assert "--param enforce_eager=true,false" in f.tune_command
    _accepted_by_tune(f.tune_command)


def test_exposed_communication(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 5, [(10, 50)], kernel="ncclDevKernel_AllReduce_Sum_bf16_RING_LL")
    t.launch(6, 5, [(60, 50)])
    d = diagnose_trace(t.write(tmp_path / "t.json"))
    f = next(f for f in d.findings if f.code == "communication-bound")
    assert f.parameters == ("tensor_parallel_size",)
    assert f.tune_command is not None
    _accepted_by_tune(f.tune_command)


@pytest.mark.slow
def test_tensorrt_llm_findings_use_its_names_and_its_tune_space() -> None:
    from slotune.collector.workload.traces import named_workload
    from slotune.tuner.diagnose import SimTarget, diagnose_workload

    context = TuneContext(("--engine", "trtllm", "--workload", "mooncake-conversation"), "trtllm")
    d = diagnose_workload(
        named_workload("mooncake-conversation"),
        target=SimTarget("trtllm"),
        num_sim_requests=40,
        context=context,
    )
    f = next(f for f in d.findings if f.code == "prefix-caching-helps")
    assert f.parameters == (
        "kv_cache_config.enable_block_reuse",
        "kv_cache_config.free_gpu_memory_fraction",
    )
    assert f.tune_command is not None
    args = shlex.split(f.tune_command)
    params = [args[i + 1] for i, a in enumerate(args) if a == "--param"]
    overrides = space_overrides(Engine.TRTLLM, None, params)
    defaults = engine_defaults(Engine.TRTLLM, "llama-3.1-8b", "h100-sxm", max_model_len=4096)
    check_overrides(Engine.TRTLLM, overrides, defaults)
    assert "max_batch_size=-" in f.tune_command
