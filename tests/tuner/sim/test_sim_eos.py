"""Output lengths independent of max_tokens: EOS-style stops and vLLM's finish_reason."""

from __future__ import annotations

from slotune.collector.workload import Trace
from slotune.collector.workload.traces import TraceRequest
from slotune.tuner.sim import TrtllmConfig, VllmConfig, simulate

TRACE = Trace(
    "eos",
    (
        TraceRequest(timestamp_s=0.0, input_tokens=100, output_tokens=5),
        TraceRequest(timestamp_s=0.0, input_tokens=100, output_tokens=50),
        TraceRequest(timestamp_s=0.1, input_tokens=100, output_tokens=20),
    ),
)


def test_requests_stop_at_eos_or_max_tokens() -> None:
    result = simulate(VllmConfig(model="llama-3.1-8b", gpu="h100-sxm"), TRACE, max_tokens=20)
    assert [r.output_tokens for r in result.records] == [5, 20, 20]
    assert [t.finish_reason for t in result.timings] == ["stop", "length", "stop"]


def test_without_max_tokens_requests_run_to_the_trace_lengths() -> None:
    config = TrtllmConfig(model="llama-3.1-8b", gpu="h100-sxm")
    result = simulate(config, TRACE)
    assert [r.output_tokens for r in result.records] == [5, 50, 20]
    assert {t.finish_reason for t in result.timings} == {"length"}
