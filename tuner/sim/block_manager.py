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

from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice, repeat
from typing import cast

from slotune.tuner.sim.request import RequestState


@dataclass(slots=True)
class _PrefixMemo:
    """One waiting request's cached prefix, kept exact as blocks come and go.

    The queue's head is asked for its prefix every step until it is admitted; a long
    prompt has hundreds of blocks. Evicting one of ``found`` truncates it there, and any
    new registration may let it grow, which the next lookup checks from its end on.
    """

    state: RequestState
    limit: int
    found: list[int]
    block_set: set[int]
    may_extend: bool = True

    def truncate_at_any(self, evicted: set[int]) -> None:
        cut = min(map(self.found.index, evicted))
        self.block_set.difference_update(self.found[cut:])
        del self.found[cut:]
        self.may_extend = True


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
        # Holders beyond the first of blocks several requests share (prefix hits on a block
        # in use); a block is free exactly when it sits in the free queue.
        self._extra_holders: dict[int, int] = {}
        self._hash: list[int | None] = [None] * num_blocks
        self._cached: dict[int, int] = {}
        self._fifo: list[int] | None = list(range(num_blocks))
        self._fifo_head = 0
        self._free: OrderedDict[int, None] = OrderedDict()
        self.prefix_queries = 0
        self.prefix_hits = 0
        self._memo: _PrefixMemo | None = None

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
        if self._fifo is not None:
            return block_id in self._fifo[self._fifo_head :]
        return block_id in self._free

    def num_free_among(self, block_ids: Sequence[int]) -> int:
        """How many of ``block_ids`` no request holds (prefix hits on cached free blocks)."""
        if not block_ids or self._fifo is not None:
            return sum(map(self.is_free, block_ids))
        return sum(map(self._free.__contains__, block_ids))

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
        memo = self._memo
        if memo is None or memo.state is not state or memo.limit != limit:
            memo = self._memo = _PrefixMemo(state, limit, [], set())
        found = memo.found
        if memo.may_extend:
            # C-level passes over doubling runs of the blocks not known to be cached yet,
            # up to the first miss (a long prompt has hundreds of blocks).
            get, hashes = self._cached.get, state.block_hashes
            run = 8
            while len(found) < limit:
                more = list(map(get, hashes[len(found) : min(limit, len(found) + run)]))
                missed = None in more
                if missed:
                    del more[more.index(None) :]
                found += cast(list[int], more)
                memo.block_set.update(cast(list[int], more))
                if missed:
                    break
                run *= 2
        memo.may_extend = False
        return list(found)

    def can_allocate(
        self, state: RequestState, num_new_tokens: int, cached: Sequence[int] = ()
    ) -> bool:
        """Whether ``num_new_tokens`` more tokens (after ``cached`` hits) fit in free blocks."""
        return self._num_to_allocate(state, num_new_tokens, cached) <= (
            self.num_free_blocks - self.num_free_among(cached)
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
        free, extra = self._free, self._extra_holders
        for bid in cached:
            if bid in free:
                del free[bid]
            else:
                extra[bid] = extra.get(bid, 0) + 1
        state.block_ids.extend(cached)
        # The hit blocks already carry these hashes: registration starts after them.
        state.num_hashed_blocks = len(cached)
        num_hit = len(cached) * self.block_size
        state.num_computed_tokens += num_hit
        state.num_cached_tokens = num_hit
        need = self.blocks_for(state.num_computed_tokens + num_new_tokens) - len(state.block_ids)
        if need > 0:
            self._take_free(state.block_ids, need)
        if self.enable_caching:
            self._register(state, state.num_computed_tokens + num_new_tokens)
        return True

    def extend_decoding(self, states: Sequence[RequestState], num_new_tokens: int) -> None:
        """``allocate(state, num_new_tokens)`` for decoding requests the free blocks cover.

        The caller has checked that the free blocks suffice (a decode run). Decoded tokens
        carry no prefix hash, so nothing is registered.
        """
        bs = self.block_size
        for state in states:
            ids = state.block_ids
            need = -(-(state.num_computed_tokens + num_new_tokens) // bs) - len(ids)
            if need > 0:
                self._take_free(ids, need)

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
        free, extra = self._free, self._extra_holders
        tail_first = state.block_ids[::-1]
        if not extra or extra.keys().isdisjoint(tail_first):
            # Nobody shares these blocks (the common case): release them in bulk.
            free.update(dict.fromkeys(tail_first))
        else:
            for bid in tail_first:
                holders = extra.get(bid, 0)
                if holders > 1:
                    extra[bid] = holders - 1
                elif holders == 1:
                    del extra[bid]
                else:
                    free[bid] = None
        state.block_ids.clear()
        state.num_hashed_blocks = 0

    # internals
    def _num_to_allocate(
        self, state: RequestState, num_new_tokens: int, cached: Sequence[int]
    ) -> int:
        total = state.num_computed_tokens + len(cached) * self.block_size + num_new_tokens
        return self.blocks_for(total) - len(state.block_ids) - len(cached)

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
        free, hashes = self._free, self._hash
        taken = list(islice(free, count))
        if self._memo is not None:
            evicted_prefix = self._memo.block_set.intersection(taken)
            if evicted_prefix:
                self._memo.truncate_at_any(evicted_prefix)
        _consume(map(free.pop, taken))
        # A block carries a hash exactly when the cache maps that hash to it.
        evicted = [h for h in map(hashes.__getitem__, taken) if h is not None]
        if evicted:
            _consume(map(self._cached.pop, evicted))
            _consume(map(hashes.__setitem__, taken, repeat(None)))
        out.extend(taken)

    def _leave_fifo_mode(self) -> None:
        fifo = self._fifo
        if fifo is None:
            return
        self._free = OrderedDict.fromkeys(fifo[self._fifo_head :])
        self._fifo = None

    def _register(self, state: RequestState, num_tokens_with_kv: int) -> None:
        self._leave_fifo_mode()
        upto = min(len(state.block_hashes), num_tokens_with_kv // self.block_size)
        first = state.num_hashed_blocks
        if upto <= first:
            return
        block_hash, cached = self._hash, self._cached
        # Blocks past the hashed ones came fresh from the free queue (no hash yet).
        new_hashes = state.block_hashes[first:upto]
        new_ids = state.block_ids[first:upto]
        if cached.keys().isdisjoint(new_hashes):
            cached.update(zip(new_hashes, new_ids, strict=True))
            _consume(map(block_hash.__setitem__, new_ids, new_hashes))
        else:
            # Another request computed some of these blocks first: its copies stay cached.
            for h, bid in zip(new_hashes, new_ids, strict=True):
                if h not in cached:
                    block_hash[bid] = h
                    cached[h] = bid
        if self._memo is not None:
            self._memo.may_extend = True
        state.num_hashed_blocks = upto


def _consume(calls: Iterable[object]) -> None:
    """Run a lazy ``map`` of calls to the end in C: bulk updates of hundreds of blocks."""
    deque(calls, maxlen=0)
