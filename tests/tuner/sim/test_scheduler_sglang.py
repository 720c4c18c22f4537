"""SGLang's scheduler: prefill first, chunks, budgets, lpm order, radix reuse, admission, retraction."""

from __future__ import annotations

from typing import Any

import pytest

from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.request import RequestState, SimRequest, prefix_block_hashes
from slotune.tuner.sim.scheduler import ScheduledBatch
from slotune.tuner.sim.scheduler_sglang import (
    LPM_MAX_QUEUE,
    SglangSchedule,
    SglangScheduler,
)

BLOCK = 16


def _schedule(**overrides: object) -> SglangSchedule:
    args: dict[str, object] = {
        "max_running_requests": 64,
        "chunked_prefill_size": 8192,
        "max_prefill_tokens": 16384,
    }
    args.update(overrides)
    return SglangSchedule(**args)  # type: ignore[arg-type]


def _scheduler(num_blocks: int = 4096, **overrides: object) -> SglangScheduler:
    bm = BlockManager(num_blocks, BLOCK, enable_caching=True)
    return SglangScheduler(_schedule(**overrides), bm)


def _state(rid: str, prompt: int, max_tokens: int = 8, prefix: int | None = None) -> RequestState:
    # Prompts with the same ``prefix`` id share their first blocks; others share nothing.
    base = 1_000_000 * (prefix if prefix is not None else hash(rid) % 1000 + 1000)
    ids = tuple(base + i for i in range(prompt)) if prefix is not None else None
    request = SimRequest(rid, 0.0, prompt, max_tokens, prompt_token_ids=ids)
    return RequestState(request=request, block_hashes=prefix_block_hashes(request, BLOCK))


def _step(s: SglangScheduler) -> ScheduledBatch:
    batch = s.schedule()
    s.update(batch)
    return batch


def _tokens(batch: ScheduledBatch) -> dict[str, int]:
    return {state.request_id: n for state, n in batch.scheduled}


def test_a_new_request_is_prefilled_while_running_requests_wait() -> None:
    s = _scheduler()
    s.add(_state("a", 100, max_tokens=50))
    _step(s)
    assert _tokens(_step(s)) == {"a": 1}  # decoding
    s.add(_state("b", 200))
    batch = _step(s)
    assert _tokens(batch) == {"b": 200}  # prefill only: a does not decode in this step
    assert batch.num_decode_seqs == 0
    assert _tokens(_step(s)) == {"a": 1, "b": 1}


def test_mixed_chunk_decodes_inside_the_prefill_batch() -> None:
    s = _scheduler(enable_mixed_chunk=True)
    s.add(_state("a", 100, max_tokens=50))
    _step(s)
    s.add(_state("b", 200))
    batch = _step(s)
    assert _tokens(batch) == {"b": 200, "a": 1}
    assert (batch.num_prefill_tokens, batch.num_decode_seqs) == (200, 1)


def test_mixed_chunk_needs_chunked_prefill() -> None:
    s = _scheduler(enable_mixed_chunk=True, chunked_prefill_size=None)
    assert not s.is_mixed


def test_a_long_prompt_is_chunked_by_chunked_prefill_size() -> None:
    s = _scheduler(chunked_prefill_size=4096)
    s.add(_state("long", 10_000))
    chunks = [_tokens(_step(s))["long"] for _ in range(3)]
    assert chunks == [4096, 4096, 10_000 - 8192]
    assert _tokens(_step(s)) == {"long": 1}


def test_the_chunked_request_goes_first_and_others_fill_what_is_left() -> None:
    s = _scheduler(chunked_prefill_size=4096)
    s.add(_state("long", 6000))
    s.add(_state("short", 1000))
    assert _tokens(_step(s)) == {"long": 4096}
    assert _tokens(_step(s)) == {"long": 6000 - 4096, "short": 1000}


def test_chunks_are_page_aligned() -> None:
    s = _scheduler(chunked_prefill_size=4100, page_size=64)
    s.add(_state("long", 10_000))
    assert _tokens(_step(s)) == {"long": 4096}


def test_max_prefill_tokens_bounds_a_batch_but_the_first_request_always_runs() -> None:
    s = _scheduler(chunked_prefill_size=None, max_prefill_tokens=8000)
    for i in range(3):
        s.add(_state(f"r{i}", 3000))
    assert _tokens(_step(s)) == {"r0": 3000, "r1": 3000}  # r2 would pass 8000
    big = _scheduler(chunked_prefill_size=None, max_prefill_tokens=8000)
    big.add(_state("huge", 12_000))
    assert _tokens(_step(big)) == {"huge": 12_000}


def test_max_running_requests_caps_admission() -> None:
    s = _scheduler(max_running_requests=2)
    for i in range(4):
        s.add(_state(f"r{i}", 100))
    assert set(_tokens(_step(s))) == {"r0", "r1"}
    assert set(_tokens(_step(s))) == {"r0", "r1"}  # decode: nobody else admitted


def _with_cached_prefix(policy: str, **overrides: Any) -> SglangScheduler:
    s = _scheduler(schedule_policy=policy, **overrides)
    s.add(_state("warm", 640, max_tokens=1, prefix=7))
    _step(s)  # prefilled and finished: its blocks stay cached
    assert not s.running
    return s


def test_lpm_admits_the_longest_cached_prefix_first() -> None:
    s = _with_cached_prefix("lpm", max_running_requests=1)
    s.add(_state("cold", 640))
    s.add(_state("hot", 640, prefix=7))
    batch = _step(s)
    assert set(_tokens(batch)) == {"hot"}
    assert batch.started[0].num_cached_tokens == 640 - BLOCK  # one block left to compute


def test_fcfs_keeps_arrival_order_with_a_cached_prefix_waiting() -> None:
    s = _with_cached_prefix("fcfs", max_running_requests=1)
    s.add(_state("cold", 640))
    s.add(_state("hot", 640, prefix=7))
    assert set(_tokens(_step(s))) == {"cold"}


def test_lpm_falls_back_to_arrival_order_for_a_long_queue() -> None:
    s = _with_cached_prefix("lpm", max_running_requests=1)
    for i in range(LPM_MAX_QUEUE):
        s.add(_state(f"cold{i}", 64))
    s.add(_state("hot", 640, prefix=7))
    assert set(_tokens(_step(s))) == {"cold0"}


def test_lpm_without_radix_cache_is_fcfs() -> None:
    s = _scheduler(schedule_policy="lpm", radix_cache=False)
    assert s.policy == "fcfs"


def test_radix_reuse_skips_the_cached_tokens_in_whole_blocks() -> None:
    s = _with_cached_prefix("fcfs")
    s.add(_state("again", 700, prefix=7))
    batch = _step(s)
    # The 640 shared tokens are 40 full blocks, all reused.
    assert _tokens(batch) == {"again": 700 - 640}
    assert batch.started[0].num_cached_tokens == 640


def _admits_second(conservativeness: float) -> bool:
    # 200 blocks = 3200 tokens. "a" runs with 2000 output tokens still to come; "b" needs
    # 200 prompt + 1000 output tokens. Reservation: ratio x 2000.
    s = _scheduler(num_blocks=200, schedule_conservativeness=conservativeness)
    s.add(_state("a", 160, max_tokens=2000))
    _step(s)
    s.add(_state("b", 200, max_tokens=1000))
    return "b" in _tokens(_step(s))


def test_conservativeness_scales_the_reservation_for_running_requests() -> None:
    # Free: 3200 - 176 (a's prompt and first token) = 3024 tokens; b needs 1200.
    assert _admits_second(1.0)  # reserve 0.7 x 1999 = 1399 -> room 1625
    assert not _admits_second(1.4)  # reserve 0.98 x 1999 = 1959 -> room 1065


def test_the_ratio_starts_from_conservativeness_and_decays_per_decode_step() -> None:
    s = _scheduler(schedule_conservativeness=1.0)
    assert s.new_token_ratio == pytest.approx(0.7)
    s.add(_state("a", 100, max_tokens=100))
    _step(s)  # prefill: no decay
    assert s.new_token_ratio == pytest.approx(0.7)
    _step(s)
    assert s.new_token_ratio == pytest.approx(0.7 - (0.7 - 0.098) / 600)
    assert _scheduler(schedule_conservativeness=2.0).new_token_ratio == 1.0


def test_kv_exhaustion_retracts_the_request_with_fewest_outputs_and_raises_the_ratio() -> None:
    # 30 blocks = 480 tokens: both fit at admission (a tiny ratio reserves almost nothing
    # for old), then run out of blocks near 240 tokens each, before either finishes.
    s = _scheduler(num_blocks=30, schedule_conservativeness=0.01)
    s.add(_state("old", 150, max_tokens=250))
    _step(s)  # prefill old
    s.add(_state("new", 150, max_tokens=120))
    assert "new" in _tokens(_step(s))
    retracted: list[str] = []
    for _ in range(120):
        batch = _step(s)
        retracted += [v.request_id for v in batch.preempted]
        if retracted:
            break
    assert retracted == ["new"]
    assert s.num_preemptions == 1
    assert [w.request_id for w in s.waiting] == ["new"]
    old = s.running[0]
    expected = (old.num_output_tokens - 1 + 20) / (250 + 1)
    assert s.new_token_ratio == pytest.approx(expected, rel=0.05)
    assert s.new_token_ratio > 0.01


def test_a_decode_run_stops_short_of_admission_and_decays_the_ratio() -> None:
    s = _scheduler()
    s.add(_state("a", 100, max_tokens=500))
    _step(s)
    _step(s)
    steps = s.decode_run_length(100)
    assert steps == 100  # nothing waits: the run is free to go on
    before = s.new_token_ratio
    s.advance_decode(steps)
    assert s.new_token_ratio < before
    s.add(_state("b", 100))
    assert s.decode_run_length(100) == 0  # b could be admitted now
