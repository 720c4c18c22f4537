"""Scheduler invariants under random workloads and configurations (hypothesis)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_fakes import check_step_invariants, drive, fake_core

from slotune.collector.workload import Trace, TraceRequest
from slotune.tuner.sim.config import TrtllmConfig, VllmConfig
from slotune.tuner.sim.engine import EngineCore, StepResult
from slotune.tuner.sim.request import SimRequest, prefix_block_hashes
from slotune.tuner.sim.simulator import replay, trace_requests

MAX_PROMPT = 300
MAX_OUTPUT = 40
PREFIX_TOKENS = 64


@st.composite
def workloads(draw: st.DrawFn) -> list[SimRequest]:
    n = draw(st.integers(1, 24))
    out: list[SimRequest] = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 0.001, 0.004, 0.02]))
        prompt = draw(st.integers(1, MAX_PROMPT))
        group = draw(st.sampled_from([None, 1, 2]))
        ids = [1000 * group + k for k in range(min(prompt, PREFIX_TOKENS))] if group else []
        ids += [10_000_000 + 1000 * i + k for k in range(prompt - len(ids))]
        out.append(
            SimRequest(
                request_id=f"r{i}",
                arrival_s=t,
                prompt_tokens=prompt,
                max_tokens=draw(st.integers(1, MAX_OUTPUT)),
                prompt_token_ids=tuple(ids),
                priority=draw(st.integers(0, 2)),
            )
        )
    return out


@st.composite
def vllm_setups(draw: st.DrawFn) -> tuple[VllmConfig, int]:
    block_size = draw(st.sampled_from([8, 16, 32]))
    chunked = draw(st.booleans())
    max_num_seqs = draw(st.integers(1, 8))
    budget = (
        draw(st.integers(max(16, max_num_seqs), 512)) if chunked else draw(st.integers(512, 1024))
    )
    partial = draw(st.sampled_from([None, 2, 3])) if chunked else None
    long_partial = draw(st.integers(1, partial)) if partial else None
    config = VllmConfig(
        model="llama-3.1-8b",
        gpu="h100-sxm",
        max_model_len=512,
        block_size=block_size,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget,
        enable_chunked_prefill=chunked,
        enable_prefix_caching=draw(st.booleans()),
        scheduling_policy=draw(st.sampled_from(["fcfs", "priority"])),
        long_prefill_token_threshold=draw(st.sampled_from([None, 64])),
        max_num_partial_prefills=partial,
        max_long_partial_prefills=long_partial,
    )
    one_request = -(-(MAX_PROMPT + MAX_OUTPUT) // block_size)
    return config, draw(st.integers(one_request, 4 * one_request))


def _exact_outputs(times: dict[str, list[float]], requests: list[SimRequest]) -> None:
    for r in requests:
        assert len(times[r.request_id]) == r.max_tokens, r.request_id


class StartOrder:
    """Checks the invariants after every step and records the order requests start in."""

    def __init__(self) -> None:
        self.order: list[str] = []

    def __call__(self, core: EngineCore, result: StepResult) -> None:
        check_step_invariants(core, result)
        self.order.extend(result.started)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=vllm_setups(), requests=workloads())
def test_vllm_invariants(setup: tuple[VllmConfig, int], requests: list[SimRequest]) -> None:
    config, num_blocks = setup
    core = fake_core(num_blocks, config)
    starts = StartOrder()
    times = drive(core, requests, starts)
    _exact_outputs(times, requests)
    bm = core.block_manager
    assert bm.num_free_blocks == bm.num_blocks, "blocks leaked"
    # Partial prefills let short prompts pass long ones on purpose.
    in_order = config.scheduling_policy == "fcfs" and not config.max_num_partial_prefills
    if core.stats.preemptions == 0 and in_order:
        arrival = {r.request_id: (r.arrival_s, i) for i, r in enumerate(requests)}
        assert starts.order == sorted(starts.order, key=arrival.__getitem__)
    if core.stats.preemptions == 0:
        assert core.stats.prefix_hits <= _repeated_block_tokens(requests, config.block_size or 16)


def test_a_request_preempting_itself_does_not_stall_the_engine() -> None:
    # Priority ties: the older running request is the victim and preempts itself while the
    # newer one still waits for a block; vLLM then runs an empty step and goes on.
    config = VllmConfig(
        model="llama-3.1-8b",
        gpu="h100-sxm",
        max_num_seqs=3,
        max_num_batched_tokens=512,
        max_model_len=512,
        block_size=8,
        enable_chunked_prefill=False,
        enable_prefix_caching=False,
        scheduling_policy="priority",
    )
    requests = [
        SimRequest(f"r{i}", 0.0, prompt, out)
        for i, (prompt, out) in enumerate([(1, 1), (1, 1), (156, 6), (286, 5)])
    ]
    core = fake_core(57, config)
    times = drive(core, requests, check_step_invariants)
    _exact_outputs(times, requests)
    assert core.stats.preemptions >= 1


def _repeated_block_tokens(requests: list[SimRequest], block_size: int) -> int:
    seen: set[int] = set()
    total = 0
    for r in sorted(requests, key=lambda r: r.arrival_s):
        hashes = prefix_block_hashes(r, block_size)
        total += sum(1 for h in hashes if h in seen) * block_size
        seen.update(hashes)
    return total


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=workloads(),
    policy=st.sampled_from(["GUARANTEED_NO_EVICT", "MAX_UTILIZATION"]),
    chunked=st.booleans(),
    reuse=st.booleans(),
    extra_blocks=st.integers(0, 40),
)
def test_trtllm_invariants(
    requests: list[SimRequest], policy: str, chunked: bool, reuse: bool, extra_blocks: int
) -> None:
    config = TrtllmConfig(
        model="llama-3.1-8b",
        gpu="h100-sxm",
        max_batch_size=6,
        max_num_tokens=512,
        max_seq_len=512,
        enable_chunked_prefill=chunked,
        enable_block_reuse=reuse,
        tokens_per_block=16,
        capacity_scheduler_policy=policy,
    )
    core = fake_core(-(-(MAX_PROMPT + MAX_OUTPUT) // 16) + extra_blocks, config)
    times = drive(core, requests, check_step_invariants)
    _exact_outputs(times, requests)
    assert core.block_manager.num_free_blocks == core.block_manager.num_blocks
    if policy == "GUARANTEED_NO_EVICT":
        assert core.stats.preemptions == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=vllm_setups(), requests=workloads())
def test_decode_runs_match_step_by_step(
    setup: tuple[VllmConfig, int], requests: list[SimRequest]
) -> None:
    config, num_blocks = setup
    # Traces carry no priorities; prefix identity travels as 32-token hash blocks.
    config = dataclasses.replace(config, scheduling_policy="fcfs")
    trace = Trace(
        "t",
        tuple(
            TraceRequest(
                r.arrival_s, r.prompt_tokens, r.max_tokens, hash_ids=_hash_blocks(r), block_size=32
            )
            for r in requests
        ),
    )
    fast = replay(fake_core(num_blocks, config), trace)
    stepwise = drive(fake_core(num_blocks, config), trace_requests(trace))
    for i, r in enumerate(requests):
        record = fast.records[i]
        assert record.num_output_tokens == r.max_tokens
        assert list(record.chunk_times_s) == _approx(stepwise[str(i)])
    assert fast.summary.engine is not None
    assert fast.summary.engine.prefix_hit_rate == pytest.approx(
        _hit_rate(trace, config, num_blocks)
    )


def _hash_blocks(r: SimRequest) -> tuple[int, ...]:
    ids = r.prompt_token_ids or ()
    return tuple(hash(ids[k : k + 32]) for k in range(0, len(ids), 32))


def _hit_rate(trace: Trace, config: VllmConfig, num_blocks: int) -> float:
    core = fake_core(num_blocks, config)
    drive(core, trace_requests(trace))
    stats = core.stats
    return stats.prefix_hits / stats.prefix_queries if stats.prefix_queries else 0.0


def _approx(values: list[float]) -> list[object]:
    return [pytest.approx(v, rel=1e-9, abs=1e-12) for v in values]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=workloads(),
    policy=st.sampled_from(["GUARANTEED_NO_EVICT", "MAX_UTILIZATION"]),
    chunked=st.booleans(),
    extra_blocks=st.integers(0, 40),
)
def test_trtllm_decode_runs_match_step_by_step(
    requests: list[SimRequest], policy: str, chunked: bool, extra_blocks: int
) -> None:
    config = TrtllmConfig(
        model="llama-3.1-8b",
        gpu="h100-sxm",
        max_batch_size=6,
        max_num_tokens=512,
        max_seq_len=512,
        enable_chunked_prefill=chunked,
        tokens_per_block=16,
        capacity_scheduler_policy=policy,
    )
    num_blocks = -(-(MAX_PROMPT + MAX_OUTPUT) // 16) + extra_blocks
    trace = Trace(
        "t",
        tuple(
            TraceRequest(
                r.arrival_s, r.prompt_tokens, r.max_tokens, hash_ids=_hash_blocks(r), block_size=32
            )
            for r in requests
        ),
    )
    fast = replay(fake_core(num_blocks, config), trace)
    stepwise = drive(fake_core(num_blocks, config), trace_requests(trace))
    for i in range(len(requests)):
        assert list(fast.records[i].chunk_times_s) == _approx(stepwise[str(i)])
