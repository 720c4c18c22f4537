"""Paged KV cache: fixed-size blocks, reference counts and prefix caching.

Mirrors vLLM V1's block pool: free blocks sit in one LRU queue; a freed block keeps its
prefix hash until it is handed out again, so a later request with the same prefix can
take it back ("cached free block"). Allocation takes the least recently freed block first
and evicts its hash. A request frees its blocks tail first, so its last blocks are
evicted before its first ones (the prefix others are most likely to share).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from tuner.sim.request import RequestState


class BlockManager:
    """KV blocks of one engine.

    Args:
        num_blocks: KV blocks the memory model left for the cache.
        block_size: tokens per block.
        enable_caching: keep and reuse prefix blocks (vLLM ``enable_prefix_caching``,
            TensorRT-LLM ``enable_block_reuse``).
    """

    def __init__(self, num_blocks: int, block_size: int, *, enable_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_caching = enable_caching
        self._ref_cnt = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._cached: dict[int, int] = {}
        self.prefix_queries = 0
        self.prefix_hits = 0

    # queries
    @property
    def num_free_blocks(self) -> int:
        """Blocks not held by any request (cached free blocks included)."""
        return len(self._free)

    @property
    def usage(self) -> float:
        """Fraction of blocks held by requests (vLLM's ``kv_cache_usage_perc``)."""
        return 1.0 - len(self._free) / self.num_blocks if self.num_blocks else 0.0

    def is_free(self, block_id: int) -> bool:
        """Whether no request holds the block (it may still carry a reusable prefix)."""
        return self._ref_cnt[block_id] == 0

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def cached_prefix(self, state: RequestState) -> list[int]:
        """Block ids of the longest cached prefix of a request that has no KV yet.

        At least one token is always left to compute, as in vLLM: the last prompt token
        must run through the model to sample the first output token.
        """
        if not self.enable_caching or not state.block_hashes:
            return []
        limit = min(len(state.block_hashes), (state.num_tokens - 1) // self.block_size)
        hits: list[int] = []
        cached = self._cached
        for h in state.block_hashes[:limit]:
            bid = cached.get(h)
            if bid is None:
                break
            hits.append(bid)
        return hits

    def can_allocate(self, state: RequestState, num_new_tokens: int,
                     cached: Sequence[int] = ()) -> bool:
        """Whether ``num_new_tokens`` more tokens (after ``cached`` hits) fit in free blocks."""
        return self._num_to_allocate(state, num_new_tokens, cached) <= (
            len(self._free) - sum(1 for b in cached if self.is_free(b)))

    # changes
    def allocate(self, state: RequestState, num_new_tokens: int,
                 cached: Sequence[int] = ()) -> bool:
        """Give a request the blocks for ``num_new_tokens`` more tokens (vLLM ``allocate_slots``).

        Args:
            state: the request; its ``num_computed_tokens`` excludes ``cached``.
            num_new_tokens: tokens scheduled this step.
            cached: prefix-hit block ids from :meth:`cached_prefix` (first allocation only).

        Returns:
            False, changing nothing, when the free blocks do not suffice.
        """
        if not self.can_allocate(state, num_new_tokens, cached):
            return False
        if cached:
            for bid in cached:
                self._touch(bid)
            state.block_ids.extend(cached)
            num_hit = len(cached) * self.block_size
            state.num_computed_tokens += num_hit
            state.num_cached_tokens = num_hit
        need = self.blocks_for(state.num_computed_tokens + num_new_tokens) - len(state.block_ids)
        if need > 0:
            state.block_ids.extend(self._pop_free() for _ in range(need))
        if self.enable_caching and state.block_hashes:
            self._register(state, state.num_computed_tokens + num_new_tokens)
        return True

    def record_lookup(self, state: RequestState) -> None:
        """Count one prefix-cache lookup of an admitted request, in tokens (vLLM's queries/hits)."""
        if self.enable_caching:
            self.prefix_queries += state.num_tokens
            self.prefix_hits += state.num_cached_tokens

    def free(self, state: RequestState) -> None:
        """Release a request's blocks, tail first; hashed ones stay reusable until evicted."""
        ref = self._ref_cnt
        free = self._free
        for bid in reversed(state.block_ids):
            ref[bid] -= 1
            if ref[bid] == 0:
                free[bid] = None
        state.block_ids.clear()
        state.num_hashed_blocks = 0

    # internals
    def _num_to_allocate(self, state: RequestState, num_new_tokens: int,
                         cached: Sequence[int]) -> int:
        total = state.num_computed_tokens + len(cached) * self.block_size + num_new_tokens
        return self.blocks_for(total) - len(state.block_ids) - len(cached)

    def _touch(self, bid: int) -> None:
        if self._ref_cnt[bid] == 0:
            del self._free[bid]
        self._ref_cnt[bid] += 1

    def _pop_free(self) -> int:
        bid, _ = self._free.popitem(last=False)
        h = self._hash[bid]
        if h is not None:
            if self._cached.get(h) == bid:
                del self._cached[h]
            self._hash[bid] = None
        self._ref_cnt[bid] = 1
        return bid

    def _register(self, state: RequestState, num_tokens_with_kv: int) -> None:
        upto = min(len(state.block_hashes), num_tokens_with_kv // self.block_size)
        for j in range(state.num_hashed_blocks, upto):
            h = state.block_hashes[j]
            bid = state.block_ids[j]
            if self._hash[bid] is None and h not in self._cached:
                self._hash[bid] = h
                self._cached[h] = bid
        state.num_hashed_blocks = max(state.num_hashed_blocks, upto)
