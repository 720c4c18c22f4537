"""Paged KV cache: fixed-size blocks, reference counts and prefix caching.

Mirrors vLLM V1's block pool: free blocks sit in one LRU queue; a freed block keeps its
prefix hash until it is handed out again, so a later request with the same prefix can
take it back ("cached free block"). Allocation takes the least recently freed block first
and evicts its hash. A request frees its blocks tail first, so its last blocks are
evicted before its first ones (the prefix others are most likely to share).

A block has no identity beyond its prefix hash: a hashed block is its hash (the cache
maps a hash to one block), and unhashed blocks are interchangeable. So a request holds a
count of blocks, and the free queue is a queue of runs, one per release: a run is the
request's unhashed tail blocks, counted, then its hashed blocks, tail first. Admitting,
extending, freeing and evicting are bulk operations on a request's hash list, with no
per-block Python work. A cached free block taken back by a hit leaves a stale entry in
its run, skipped when the run is evicted.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import filterfalse
from typing import cast

from slotune.tuner.sim.request import RequestState


@dataclass(slots=True, eq=False)
class _Run:
    """Blocks one request released, in eviction order: ``anonymous`` unhashed, then ``keys``.

    ``keys[:head]`` are evicted; a later key is live while the cache maps it to this run.
    ``num_free`` counts the live blocks (anonymous included).
    """

    anonymous: int
    keys: list[object]
    num_free: int
    head: int = 0


# What the cache maps a hash to while a request holds its block.
_HELD = _Run(0, [], 0)


class _Unshared:
    """Key of a block whose hash another block already carries: never a prefix hit."""

    __slots__ = ()


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
        self._num_free = num_blocks
        self._queue: deque[_Run] = deque([_Run(num_blocks, [], num_blocks)])
        # hash -> the run holding its free block, or _HELD
        self._cached: dict[object, _Run] = {}
        # Holders beyond the first of blocks several requests share (prefix hits on a
        # block in use).
        self._extra_holders: dict[object, int] = {}
        self.prefix_queries = 0
        self.prefix_hits = 0
        self._memo: _PrefixMemo | None = None

    # queries
    @property
    def num_free_blocks(self) -> int:
        """Blocks not held by any request (cached free blocks included)."""
        return self._num_free

    @property
    def usage(self) -> float:
        """Fraction of blocks held by requests (vLLM's ``kv_cache_usage_perc``)."""
        return 1.0 - self._num_free / self.num_blocks if self.num_blocks else 0.0

    @property
    def num_shared_holds(self) -> int:
        """Holds beyond the first on blocks several requests share."""
        return sum(self._extra_holders.values())

    def num_free_among(self, hits: Sequence[int]) -> int:
        """How many prefix hits (from :meth:`cached_prefix`) are cached free blocks."""
        if not hits:
            return 0
        return len(hits) - list(map(self._cached.__getitem__, hits)).count(_HELD)

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def cached_prefix(self, state: RequestState) -> list[int]:
        """Hashes of the longest cached prefix of a request that has no KV yet.

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
            contains, hashes = self._cached.__contains__, state.block_hashes
            run = 8
            while len(found) < limit:
                more = hashes[len(found) : min(limit, len(found) + run)]
                hit = list(map(contains, more))
                missed = False in hit
                if missed:
                    del more[hit.index(False) :]
                found += more
                memo.block_set.update(more)
                if missed:
                    break
                run *= 2
        memo.may_extend = False
        return list(found)

    def can_allocate(
        self, state: RequestState, num_new_tokens: int, hits: Sequence[int] = ()
    ) -> bool:
        """Whether ``num_new_tokens`` more tokens (after ``hits``) fit in free blocks."""
        need = self._num_to_allocate(state, num_new_tokens, hits)
        # Counting the cached free blocks among the hits walks them: only when it decides.
        if need <= self._num_free - len(hits):
            return True
        if need > self._num_free:
            return False
        return need <= self._num_free - self.num_free_among(hits)

    # changes
    def allocate(self, state: RequestState, num_new_tokens: int, hits: Sequence[int] = ()) -> bool:
        """Give a request the blocks for ``num_new_tokens`` more tokens (vLLM ``allocate_slots``).

        Args:
            state: the request; its ``num_computed_tokens`` excludes ``hits``.
            num_new_tokens: tokens scheduled this step.
            hits: prefix-hit hashes from :meth:`cached_prefix` (first allocation only).

        Returns:
            False, changing nothing, when the free blocks do not suffice.
        """
        if not hits:
            # Hot path (every running request, every step): no prefix hits to take.
            need = -(-(state.num_computed_tokens + num_new_tokens) // self.block_size) - (
                state.num_blocks
            )
            if need > 0:
                if need > self._num_free:
                    return False
                self._take_free(need)
                state.num_blocks += need
            if self.enable_caching and state.num_hashed_blocks < len(state.block_hashes):
                self._register(state, state.num_computed_tokens + num_new_tokens)
            return True
        if not self.can_allocate(state, num_new_tokens, hits):
            return False
        self._hold(hits)
        state.num_blocks += len(hits)
        # The hit blocks already carry these hashes: registration starts after them.
        state.num_hashed_blocks = len(hits)
        num_hit = len(hits) * self.block_size
        state.num_computed_tokens += num_hit
        state.num_cached_tokens = num_hit
        need = self.blocks_for(state.num_computed_tokens + num_new_tokens) - state.num_blocks
        if need > 0:
            self._take_free(need)
            state.num_blocks += need
        if self.enable_caching:
            self._register(state, state.num_computed_tokens + num_new_tokens)
        return True

    def extend_decoding(self, states: Sequence[RequestState], num_new_tokens: int) -> None:
        """``allocate(state, num_new_tokens)`` for decoding requests the free blocks cover.

        The caller has checked that the free blocks suffice (a decode run). Decoded tokens
        carry no prefix hash, so nothing is registered.
        """
        bs = self.block_size
        total = 0
        for state in states:
            need = -(-(state.num_computed_tokens + num_new_tokens) // bs) - state.num_blocks
            if need > 0:
                state.num_blocks += need
                total += need
        if total:
            self._take_free(total)

    def record_lookup(self, state: RequestState) -> None:
        """Count one prefix-cache lookup of an admitted request, in tokens (vLLM's queries/hits)."""
        if self.enable_caching:
            self.prefix_queries += state.num_tokens
            self.prefix_hits += state.num_cached_tokens

    def free(self, state: RequestState) -> None:
        """Release a request's blocks, tail first; hashed ones stay reusable until evicted."""
        num_blocks, hashed = state.num_blocks, state.num_hashed_blocks
        keys = cast(list[object], state.block_hashes[hashed - 1 :: -1] if hashed else [])
        if state.unshared_blocks:
            for j, key in state.unshared_blocks.items():
                keys[hashed - 1 - j] = key
            state.unshared_blocks = None
        extra = self._extra_holders
        released = num_blocks
        shared = extra.keys() & keys if extra else None
        if shared:
            # Blocks other requests still hold lose a holder and stay out of the queue.
            for key in shared:
                holders = extra[key]
                if holders > 1:
                    extra[key] = holders - 1
                else:
                    del extra[key]
            released -= len(shared)
            keys = list(filterfalse(shared.__contains__, keys))
        state.num_blocks = 0
        state.num_hashed_blocks = 0
        if released:
            self._release(num_blocks - hashed, keys, released)

    # internals
    def _num_to_allocate(
        self, state: RequestState, num_new_tokens: int, hits: Sequence[int]
    ) -> int:
        total = state.num_computed_tokens + len(hits) * self.block_size + num_new_tokens
        return self.blocks_for(total) - state.num_blocks - len(hits)

    def _hold(self, hits: Sequence[int]) -> None:
        """Take prefix-hit blocks: cached free ones leave the free queue, held ones gain a holder."""
        cached = self._cached
        runs = Counter(map(cached.__getitem__, hits))
        num_held = runs.pop(_HELD, 0)
        for run, k in runs.items():
            run.num_free -= k
        self._num_free -= len(hits) - num_held
        if num_held:
            extra = self._extra_holders
            for h in hits:
                if cached[h] is _HELD:
                    extra[h] = extra.get(h, 0) + 1
        cached.update(dict.fromkeys(hits, _HELD))

    def _release(self, anonymous: int, keys: list[object], num_blocks: int) -> None:
        """Queue released blocks as one run: ``anonymous`` unhashed ones, then ``keys``."""
        queue = self._queue
        last = queue[-1] if queue else None
        if last is not None and not last.keys:
            # The newest run is unhashed blocks only: extend it rather than queue another.
            run = last
            run.anonymous += anonymous
            run.keys = keys
            run.num_free += num_blocks
        else:
            run = _Run(anonymous, keys, num_blocks)
            queue.append(run)
        if keys:
            self._cached.update(dict.fromkeys(keys, run))
        self._num_free += num_blocks

    def _take_free(self, count: int) -> None:
        """Take ``count`` least recently freed blocks, evicting their hashes."""
        self._num_free -= count
        queue, cached = self._queue, self._cached
        evicted: list[object] = []
        while count:
            run = queue[0]
            live_keys = run.num_free - run.anonymous
            if run.num_free <= count:
                count -= run.num_free
                rest = run.keys[run.head :]
                if live_keys == len(rest):
                    evicted += rest
                elif live_keys:
                    evicted += [key for key in rest if cached.get(key) is run]
                queue.popleft()
                continue
            k = min(run.anonymous, count)
            run.anonymous -= k
            run.num_free -= count
            count -= k
            if count:
                keys, head = run.keys, run.head
                if live_keys == len(keys) - head:
                    evicted += keys[head : head + count]
                    run.head = head + count
                else:
                    i = head
                    while count:
                        key = keys[i]
                        i += 1
                        if cached.get(key) is run:
                            evicted.append(key)
                            count -= 1
                    run.head = i
                count = 0
        if not evicted:
            return
        memo = self._memo
        if memo is not None:
            evicted_prefix = memo.block_set.intersection(cast(list[int], evicted))
            if evicted_prefix:
                memo.truncate_at_any(evicted_prefix)
        _consume(map(cached.pop, evicted))

    def _register(self, state: RequestState, num_tokens_with_kv: int) -> None:
        upto = min(len(state.block_hashes), num_tokens_with_kv // self.block_size)
        first = state.num_hashed_blocks
        if upto <= first:
            return
        cached = self._cached
        new_hashes = state.block_hashes[first:upto]
        if cached.keys().isdisjoint(new_hashes):
            cached.update(dict.fromkeys(new_hashes, _HELD))
        else:
            # Another request computed some of these blocks first: its copies stay cached,
            # and these are plain blocks no prefix will hit.
            unshared = state.unshared_blocks
            if unshared is None:
                unshared = state.unshared_blocks = {}
            for j, h in enumerate(new_hashes, first):
                if h in cached:
                    unshared[j] = _Unshared()
                else:
                    cached[h] = _HELD
        if self._memo is not None:
            self._memo.may_extend = True
        state.num_hashed_blocks = upto


def _consume(calls: Iterable[object]) -> None:
    """Run a lazy ``map`` of calls to the end in C: bulk updates of hundreds of blocks."""
    deque(calls, maxlen=0)
