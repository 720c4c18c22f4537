"""Paged KV cache: fixed-size blocks, reference counts and prefix caching.

Mirrors vLLM V1's block pool: free blocks sit in one LRU queue; a freed block keeps its
prefix hash until it is handed out again, so a later request with the same prefix can
take it back ("cached free block"). Allocation takes the least recently freed block first
and evicts its hash. A request frees its blocks tail first, so its last blocks are
evicted before its first ones (the prefix others are most likely to share).

Until the first prefix hash is registered every free block is interchangeable, so the free
queue is a plain FIFO list moved in bulk (traces without prefix identity never leave this
mode); the LRU queue with per-block reference counts takes over at the first hash.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from slotune.tuner.sim.request import RequestState


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
        self._cached: dict[int, int] = {}
        self._fifo: list[int] | None = list(range(num_blocks))
        self._fifo_head = 0
        self._free: OrderedDict[int, None] = OrderedDict()
        self.prefix_queries = 0
        self.prefix_hits = 0

    # queries
    @property
    def num_free_blocks(self) -> int:
        """Blocks not held by any request (cached free blocks included)."""
        if self._fifo is not None:
            return len(self._fifo) - self._fifo_head
        return len(self._free)

    @property
    def usage(self) -> float:
        """Fraction of blocks held by requests (vLLM's ``kv_cache_usage_perc``)."""
        return 1.0 - self.num_free_blocks / self.num_blocks if self.num_blocks else 0.0

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

    def can_allocate(
        self, state: RequestState, num_new_tokens: int, cached: Sequence[int] = ()
    ) -> bool:
        """Whether ``num_new_tokens`` more tokens (after ``cached`` hits) fit in free blocks."""
        return self._num_to_allocate(state, num_new_tokens, cached) <= (
            self.num_free_blocks - sum(1 for b in cached if self.is_free(b))
        )

    # changes
    def allocate(
        self, state: RequestState, num_new_tokens: int, cached: Sequence[int] = ()
    ) -> bool:
        """Give a request the blocks for ``num_new_tokens`` more tokens (vLLM ``allocate_slots``).

        Args:
            state: the request; its ``num_computed_tokens`` excludes ``cached``.
            num_new_tokens: tokens scheduled this step.
            cached: prefix-hit block ids from :meth:`cached_prefix` (first allocation only).

        Returns:
            False, changing nothing, when the free blocks do not suffice.
        """
        if not cached:
            # Hot path (every running request, every step): no prefix hits to take.
            need = -(-(state.num_computed_tokens + num_new_tokens) // self.block_size) - len(
                state.block_ids
            )
            if need > 0:
                if need > self.num_free_blocks:
                    return False
                self._take_free(state.block_ids, need)
            if self.enable_caching and state.num_hashed_blocks < len(state.block_hashes):
                self._register(state, state.num_computed_tokens + num_new_tokens)
            return True
        if not self.can_allocate(state, num_new_tokens, cached):
            return False
        for bid in cached:
            self._touch(bid)
        state.block_ids.extend(cached)
        num_hit = len(cached) * self.block_size
        state.num_computed_tokens += num_hit
        state.num_cached_tokens = num_hit
        need = self.blocks_for(state.num_computed_tokens + num_new_tokens) - len(state.block_ids)
        if need > 0:
            self._take_free(state.block_ids, need)
        if self.enable_caching:
            self._register(state, state.num_computed_tokens + num_new_tokens)
        return True

    def record_lookup(self, state: RequestState) -> None:
        """Count one prefix-cache lookup of an admitted request, in tokens (vLLM's queries/hits)."""
        if self.enable_caching:
            self.prefix_queries += state.num_tokens
            self.prefix_hits += state.num_cached_tokens

    def free(self, state: RequestState) -> None:
        """Release a request's blocks, tail first; hashed ones stay reusable until evicted."""
        if self._fifo is not None:
            self._fifo.extend(reversed(state.block_ids))
            state.block_ids.clear()
            return
        ref = self._ref_cnt
        free = self._free
        for bid in reversed(state.block_ids):
            ref[bid] -= 1
            if ref[bid] == 0:
                free[bid] = None
        state.block_ids.clear()
        state.num_hashed_blocks = 0

    # internals
    def _num_to_allocate(
        self, state: RequestState, num_new_tokens: int, cached: Sequence[int]
    ) -> int:
        total = state.num_computed_tokens + len(cached) * self.block_size + num_new_tokens
        return self.blocks_for(total) - len(state.block_ids) - len(cached)

    def _touch(self, bid: int) -> None:
        if self._ref_cnt[bid] == 0:
            del self._free[bid]
        self._ref_cnt[bid] += 1

    def _take_free(self, out: list[int], count: int) -> None:
        """Move ``count`` least recently freed blocks to ``out``, evicting their hashes."""
        fifo = self._fifo
        if fifo is not None:
            head = self._fifo_head
            out.extend(fifo[head : head + count])
            head += count
            if head > 4096 and 2 * head > len(fifo):
                del fifo[:head]
                head = 0
            self._fifo_head = head
            return
        popitem = self._free.popitem
        hashes, cached, ref = self._hash, self._cached, self._ref_cnt
        append = out.append
        for _ in range(count):
            bid = popitem(False)[0]
            h = hashes[bid]
            if h is not None:
                # A block carries a hash exactly when the cache maps that hash to it.
                del cached[h]
                hashes[bid] = None
            ref[bid] = 1
            append(bid)

    def _leave_fifo_mode(self) -> None:
        fifo = self._fifo
        if fifo is None:
            return
        free_ids = fifo[self._fifo_head :]
        free_set = set(free_ids)
        self._ref_cnt = [0 if b in free_set else 1 for b in range(self.num_blocks)]
        self._free = OrderedDict.fromkeys(free_ids)
        self._fifo = None

    def _register(self, state: RequestState, num_tokens_with_kv: int) -> None:
        self._leave_fifo_mode()
        upto = min(len(state.block_hashes), num_tokens_with_kv // self.block_size)
        block_hash, cached = self._hash, self._cached
        hashes, ids = state.block_hashes, state.block_ids
        for j in range(state.num_hashed_blocks, upto):
            h = hashes[j]
            bid = ids[j]
            if block_hash[bid] is None and h not in cached:
                block_hash[bid] = h
                cached[h] = bid
        if upto > state.num_hashed_blocks:
            state.num_hashed_blocks = upto
