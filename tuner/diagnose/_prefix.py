"""Prefix reuse of a trace: how many prompt blocks were seen before, by whom, and how much KV
memory keeps them.

Blocks are the trace's ``hash_ids`` (Mooncake: 512 tokens each; slotune bench: block hashes
of the prompts it sent): equal ids mean identical prompt text up to and including that block,
which is exactly what a prefix cache can reuse.

The KV capacity for the reused working set comes from LRU stack distances (Mattson et al.):
a reference hits in an LRU cache of C blocks iff fewer than C distinct blocks were touched
since the block's previous use. One pass gives the hit share at every capacity; the reported
capacity is the smallest that keeps 90 % of the hits an unbounded cache would get.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slotune.collector.workload import TraceRequest

WORKING_SET_HIT_FRACTION = 0.9
SYSTEM_PROMPT_MIN_SHARE = 0.05  # a first block shared by this share of requests is a fixed prompt


@dataclass(frozen=True, slots=True)
class PrefixReuse:
    """Prefix reuse over a trace's prompt blocks.

    Attributes:
        reused_block_share: block references whose block was seen before (an unbounded
            prefix cache's hit rate, in blocks).
        reused_token_share: prompt tokens in those blocks over all prompt tokens.
        multi_turn_share: requests whose prompt extends an earlier request's whole prompt
            (a conversation's next turn), or that share a session id with an earlier one.
        system_prompt_share: requests that start with the most common first block, when it
            is shared by at least 5 % of requests (a fixed system prompt), else 0.
        working_set_blocks: LRU capacity keeping 90 % of the unbounded cache's hits.
        capacity_tokens: the KV capacity the reuse was measured against (one replica's),
            None when not given.
        reused_block_share_at_capacity: the share of block references an LRU cache of that
            capacity serves.
    """

    block_size: int
    num_blocks: int
    num_distinct_blocks: int
    reused_block_share: float
    reused_token_share: float
    multi_turn_share: float
    system_prompt_share: float
    working_set_blocks: int
    capacity_tokens: int | None = None
    reused_block_share_at_capacity: float | None = None

    @property
    def working_set_tokens(self) -> int:
        return self.working_set_blocks * self.block_size

    def to_dict(self) -> dict[str, Any]:
        return {
            "block_size": self.block_size,
            "num_blocks": self.num_blocks,
            "num_distinct_blocks": self.num_distinct_blocks,
            "reused_block_share": self.reused_block_share,
            "reused_token_share": self.reused_token_share,
            "multi_turn_share": self.multi_turn_share,
            "system_prompt_share": self.system_prompt_share,
            "working_set_blocks": self.working_set_blocks,
            "working_set_tokens": self.working_set_tokens,
            "capacity_tokens": self.capacity_tokens,
            "reused_block_share_at_capacity": self.reused_block_share_at_capacity,
        }


def prefix_reuse(
    requests: Sequence[TraceRequest],
    default_block_size: int,
    capacity_tokens: int | None = None,
) -> PrefixReuse | None:
    """Prefix reuse of requests that carry ``hash_ids``; None when none does.

    Args:
        requests: the trace's requests, in arrival order.
        default_block_size: tokens per block when the requests do not say.
        capacity_tokens: a replica's KV capacity, to report the reuse an LRU cache of that
            size keeps.
    """
    with_blocks = [r for r in requests if r.hash_ids]
    if not with_blocks:
        return None
    block_size = with_blocks[0].block_size or default_block_size
    refs = [h for r in with_blocks for h in r.hash_ids]
    distances = _stack_distances(refs)
    hits = np.sort(distances[distances >= 0])
    seen: set[int] = set()
    reused = 0
    reused_tokens = 0.0
    total_tokens = 0.0
    for r in with_blocks:
        n = len(r.hash_ids)
        for i, h in enumerate(r.hash_ids):
            # The last block holds the remainder of the prompt, the others are full.
            tokens = block_size if i < n - 1 else r.input_tokens - block_size * (n - 1)
            tokens = max(tokens, 0)
            total_tokens += tokens
            if h in seen:
                reused += 1
                reused_tokens += tokens
            else:
                seen.add(h)
    return PrefixReuse(
        block_size=block_size,
        num_blocks=len(refs),
        num_distinct_blocks=len(seen),
        reused_block_share=reused / len(refs),
        reused_token_share=reused_tokens / total_tokens if total_tokens else 0.0,
        multi_turn_share=_multi_turn_share(with_blocks),
        system_prompt_share=_system_prompt_share(with_blocks),
        working_set_blocks=_working_set(hits),
        capacity_tokens=capacity_tokens,
        reused_block_share_at_capacity=(
            None
            if capacity_tokens is None
            else float(np.searchsorted(hits, capacity_tokens // block_size)) / len(refs)
        ),
    )


def _multi_turn_share(requests: Sequence[TraceRequest]) -> float:
    prompts: set[tuple[int, ...]] = set()
    sessions: set[str] = set()
    turns = 0
    for r in requests:
        h = r.hash_ids
        # The previous turn's last block was partial, so its full blocks are what repeats.
        continues = any(h[:k] in prompts for k in range(len(h) - 1, 1, -1))
        if continues or (r.session_id is not None and r.session_id in sessions):
            turns += 1
        if len(h) > 2:
            prompts.add(h[:-1])
        if r.session_id is not None:
            sessions.add(r.session_id)
    return turns / len(requests)


def _system_prompt_share(requests: Sequence[TraceRequest]) -> float:
    _, counts = np.unique([r.hash_ids[0] for r in requests], return_counts=True)
    share = float(counts.max()) / len(requests)
    return share if share >= SYSTEM_PROMPT_MIN_SHARE else 0.0


def _working_set(hits: np.ndarray[Any, np.dtype[np.int64]]) -> int:
    """Smallest LRU capacity (blocks) keeping 90 % of an unbounded cache's hits, from the
    sorted stack distances of the hits."""
    if hits.size == 0:
        return 0
    # A hit at distance d needs a cache of d + 1 blocks.
    k = int(np.ceil(WORKING_SET_HIT_FRACTION * hits.size)) - 1
    return int(hits[k]) + 1


def _stack_distances(refs: Sequence[int]) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Distinct blocks touched since each reference's previous use (-1: first use).

    A Fenwick tree over positions marks each block's latest use; the distance is the number
    of marks after the previous use.
    """
    n = len(refs)
    tree = [0] * (n + 1)

    def add(i: int, v: int) -> None:
        i += 1
        while i <= n:
            tree[i] += v
            i += i & -i

    def prefix(i: int) -> int:  # marks at positions < i
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    last: dict[int, int] = {}
    out = np.full(n, -1, dtype=np.int64)
    marks = 0
    for pos, h in enumerate(refs):
        prev = last.get(h)
        if prev is not None:
            out[pos] = marks - prefix(prev + 1)
            add(prev, -1)
            marks -= 1
        add(pos, 1)
        marks += 1
        last[h] = pos
    return out
