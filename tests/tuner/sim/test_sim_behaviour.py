"""The simulator behaves like a continuous-batching engine (real cost and memory models)."""

from __future__ import annotations

import pytest

from slotune.collector.errors import EngineConfigError
from slotune.collector.slo import parse_slos
from slotune.collector.workload import Trace, TraceRequest, named_workload, retime
from slotune.tuner.sim import (
    EngineCore,
    RequestRejected,
    SimRequest,
    TrtllmConfig,
    VllmConfig,
    simulate,
)
from slotune.tuner.sim.simulator import load_workload

L8B = {"model": "llama-3.1-8b", "gpu": "h100-sxm"}


def _mean(result: object, metric: str, stat: str = "mean") -> float:
    return float(result.summary.to_dict()[metric][stat])  # type: ignore[attr-defined]


def test_chunked_prefill_trades_ttft_for_itl() -> None:
    trace = load_workload(input_len="3000", output_len="150", num_requests=120, rate=6, seed=1)
    common = {**L8B, "max_model_len": 8192, "max_num_seqs": 256}
    chunked = simulate(VllmConfig(**common, max_num_batched_tokens=512), trace)
    whole = simulate(VllmConfig(**common, enable_chunked_prefill=False), trace)
    assert _mean(chunked, "ttft_ms") > 1.3 * _mean(whole, "ttft_ms")
    assert _mean(chunked, "itl_ms", "p99") < 0.5 * _mean(whole, "itl_ms", "p99")


def _shared_prefix_trace(shared: bool) -> Trace:
    # 60 requests of 4 x 512-token blocks; with `shared` the first three blocks repeat.
    reqs = []
    for i in range(60):
        head = (1, 2, 3) if shared else (10 * i + 1, 10 * i + 2, 10 * i + 3)
        reqs.append(
            TraceRequest(
                timestamp_s=0.25 * i,
                input_tokens=2048,
                output_tokens=50,
                hash_ids=(*head, 10_000 + i),
                block_size=512,
            )
        )
    return Trace("prefix", tuple(reqs))


def test_prefix_caching_pays_only_when_prefixes_repeat() -> None:
    for shared in (True, False):
        trace = _shared_prefix_trace(shared)
        on = simulate(VllmConfig(**L8B, enable_prefix_caching=True), trace)
        off = simulate(VllmConfig(**L8B, enable_prefix_caching=False), trace)
        if shared:
            assert on.summary.engine.prefix_hit_rate > 0.6
            assert _mean(on, "ttft_ms") < 0.6 * _mean(off, "ttft_ms")
        else:
            assert on.summary.engine.prefix_hit_rate == 0.0
            assert _mean(on, "ttft_ms") == pytest.approx(_mean(off, "ttft_ms"))


def test_mooncake_hash_ids_give_real_prefix_hits() -> None:
    # 512-token Mooncake blocks map onto 16-token engine blocks: with a cache large enough
    # for this window, every repeated prefix block of the trace is a hit.
    trace = retime(named_workload("mooncake-synthetic"), num_requests=80, time_scale=4.0)
    seen: set[int] = set()
    repeated = 0
    for r in trace.requests:
        for k, h in enumerate(r.hash_ids):
            if h not in seen:
                break
            repeated += min(512, r.input_tokens - 512 * k)
        seen.update(r.hash_ids)
    total = sum(r.input_tokens for r in trace.requests)
    result = simulate(VllmConfig(**L8B), trace)
    assert repeated > 0
    assert result.summary.engine.prefix_hit_rate == pytest.approx(repeated / total, rel=0.02)


def test_ttft_explodes_when_kv_capacity_runs_out() -> None:
    trace = load_workload(input_len="2000", output_len="300", num_requests=200, rate=8, seed=2)
    roomy = simulate(VllmConfig(**L8B, max_model_len=8192), trace)
    tight = simulate(VllmConfig(**L8B, max_model_len=8192, gpu_memory_utilization=0.27), trace)
    assert tight.summary.engine.kv_tokens < roomy.summary.engine.kv_tokens / 5
    assert _mean(tight, "ttft_ms") > 10 * _mean(roomy, "ttft_ms")
    assert tight.summary.engine.preemptions > 0


def test_trtllm_policies_under_kv_pressure() -> None:
    trace = load_workload(input_len="2000", output_len="300", num_requests=150, rate=8, seed=2)
    common = {**L8B, "max_seq_len": 8192, "free_gpu_memory_fraction": 0.06}
    guaranteed = simulate(TrtllmConfig(**common), trace)
    packed = simulate(TrtllmConfig(**common, capacity_scheduler_policy="MAX_UTILIZATION"), trace)
    assert guaranteed.summary.engine.preemptions == 0
    assert guaranteed.summary.num_completed == packed.summary.num_completed == 150
    assert _mean(packed, "ttft_ms") < _mean(guaranteed, "ttft_ms")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (VllmConfig(model="llama-3.1-70b", gpu="l4"), "out of memory"),
        (VllmConfig(**L8B, gpu_memory_utilization=0.12), "No available memory for the cache"),
        (VllmConfig(**L8B, gpu_memory_utilization=0.25), "estimated maximum model length"),
        (VllmConfig(**L8B, max_num_batched_tokens=64), "must be greater than or equal to"),
    ],
)
def test_engine_refuses_to_start(config: VllmConfig, message: str) -> None:
    with pytest.raises(EngineConfigError, match=message):
        EngineCore.create(config)


def test_too_long_requests_get_http_400_and_the_rest_are_served() -> None:
    trace = Trace(
        "t", (TraceRequest(0.0, 100, 10), TraceRequest(0.1, 9000, 10), TraceRequest(0.2, 100, 10))
    )
    result = simulate(VllmConfig(**L8B, max_model_len=8192), trace)
    errors = [r.error for r in result.records]
    assert errors == [None, "http_4xx", None]
    assert "maximum context length is 8192 tokens" in (result.records[1].error_detail or "")


def test_result_timings_series_and_summary() -> None:
    trace = retime(named_workload("azure-conv"), num_requests=200)
    result = simulate(VllmConfig(**L8B, max_num_seqs=32), trace, slos=parse_slos(["ttft:p99<=2s"]))
    summary = result.summary.to_dict()
    for key in (
        "prefix_hit_rate",
        "preemptions",
        "kv_blocks",
        "kv_tokens",
        "step_time_breakdown",
        "goodput",
        "request_throughput",
    ):
        assert key in summary
    split = summary["step_time_breakdown"]
    assert split["busy_s"] == pytest.approx(
        split["compute_s"] + split["memory_s"] + split["communication_s"] + split["overhead_s"]
    )
    for timing, record in zip(result.timings, result.records, strict=True):
        assert timing.scheduled_s is not None and timing.queued_s is not None
        assert timing.arrival_s <= timing.scheduled_s <= record.first_token_s  # type: ignore[operator]
        assert timing.finished_s == record.end_s
        assert record.num_output_tokens == len(record.chunk_times_s)
    assert len(result.series.time_s) > 10
    assert max(result.series.requests_running) <= 32
    assert result.config["max_num_seqs"] == 32 and result.config["engine"] == "vllm"
    assert any("GPU KV cache size" in line for line in result.kv_log)


def test_engine_core_as_the_emulated_engine_drives_it() -> None:
    core = EngineCore.create(VllmConfig(**L8B, max_model_len=4096))
    core.add_request(
        SimRequest("a", 0.0, prompt_tokens=100, max_tokens=3, prompt_token_ids=tuple(range(100)))
    )
    core.add_request(SimRequest("b", 0.0, prompt_tokens=50, max_tokens=5))
    with pytest.raises(RequestRejected, match="already"):
        core.add_request(SimRequest("b", 0.0, prompt_tokens=50, max_tokens=5))
    first = core.step()
    assert first is not None and sorted(first.tokens) == [("a", 1), ("b", 1)]
    assert first.num_prefill_tokens == 150 and first.duration_s > 0
    assert core.abort("b") and not core.abort("b")
    produced = 1
    while (result := core.step()) is not None:
        produced += sum(n for rid, n in result.tokens if rid == "a")
    assert produced == 3 and not core.has_unfinished()
    stats = core.stats
    assert (stats.requests_running, stats.requests_waiting, stats.kv_usage) == (0, 0, 0.0)
    assert stats.prompt_tokens == 150 and stats.generation_tokens == 4
