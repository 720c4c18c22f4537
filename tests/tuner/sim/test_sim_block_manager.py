"""Paged KV blocks with prefix caching: hits, sharing, LRU eviction, no leaks."""

from __future__ import annotations

import pytest

from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.request import RequestState, SimRequest, prefix_block_hashes

BLOCK = 4


def _state(rid: str, ids: list[int], max_tokens: int = 4) -> RequestState:
    request = SimRequest(rid, 0.0, len(ids), max_tokens, prompt_token_ids=tuple(ids))
    return RequestState(request=request, block_hashes=prefix_block_hashes(request, BLOCK))


def _admit(bm: BlockManager, state: RequestState) -> bool:
    cached = bm.cached_prefix(state)
    remaining = state.num_tokens - len(cached) * BLOCK
    ok = bm.allocate(state, remaining, cached)
    if ok:
        bm.record_lookup(state)
        state.num_computed_tokens += remaining
    return ok


def test_shared_prefix_is_computed_once_and_shared() -> None:
    bm = BlockManager(16, BLOCK, enable_caching=True)
    a = _state("a", [*range(12), 100, 101])
    b = _state("b", [*range(12), 200, 201])
    assert _admit(bm, a) and _admit(bm, b)
    assert b.num_cached_tokens == 12  # three full shared blocks
    assert bm.num_shared_holds == 3  # the same physical blocks
    assert bm.num_free_blocks == 16 - 4 - 1  # a: 4 blocks, b: 1 new block
    assert (bm.prefix_queries, bm.prefix_hits) == (28, 12)
    bm.free(a)
    bm.free(b)
    assert bm.num_free_blocks == 16


def test_a_full_hit_still_computes_the_last_token() -> None:
    bm = BlockManager(8, BLOCK, enable_caching=True)
    a = _state("a", list(range(8)))
    assert _admit(bm, a)
    bm.free(a)
    again = _state("again", list(range(8)))
    assert len(bm.cached_prefix(again)) == 1  # 7 tokens may hit: one full block


def test_freed_blocks_stay_reusable_until_evicted_least_recent_first() -> None:
    bm = BlockManager(4, BLOCK, enable_caching=True)
    old = _state("old", list(range(8)), max_tokens=1)
    assert _admit(bm, old)
    bm.free(old)
    assert len(bm.cached_prefix(_state("x", [*range(8), 9]))) == 2
    # Two never-used blocks are handed out first, then old's tail block, then its head.
    filler = _state("filler", [1000 + i for i in range(12)], max_tokens=1)
    assert _admit(bm, filler)
    assert len(bm.cached_prefix(_state("y", [*range(8), 9]))) == 1
    bm.free(filler)
    assert bm.num_free_blocks == 4


def test_allocation_fails_cleanly_when_blocks_run_out() -> None:
    bm = BlockManager(3, BLOCK, enable_caching=False)
    big = _state("big", list(range(16)))
    assert not bm.allocate(big, 16)
    assert big.num_blocks == 0 and bm.num_free_blocks == 3
    small = _state("small", list(range(8)))
    assert bm.allocate(small, 8) and bm.usage == pytest.approx(2 / 3)


def test_trace_hash_ids_map_onto_engine_blocks() -> None:
    a = SimRequest("a", 0.0, 1100, 1, hash_ids=(7, 8, 9), hash_block_size=512)
    b = SimRequest("b", 0.0, 1100, 1, hash_ids=(7, 8, 5), hash_block_size=512)
    ha, hb = prefix_block_hashes(a, 16), prefix_block_hashes(b, 16)
    assert len(ha) == 1100 // 16
    assert ha[:64] == hb[:64]  # two shared 512-token blocks = 64 engine blocks
    assert ha[64] != hb[64]
    # An engine block larger than a trace block covers pieces of two trace blocks.
    assert prefix_block_hashes(a, 1024)[0] == prefix_block_hashes(b, 1024)[0]
    assert len(prefix_block_hashes(SimRequest("c", 0.0, 100, 1), 16)) == 0
