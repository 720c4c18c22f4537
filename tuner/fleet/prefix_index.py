"""Which prefix blocks each replica probably holds, learnt from where requests were sent.

The router cannot see a replica's cache, so it remembers the blocks of the prompts it sent
there (llm-d's approximate prefix-cache scorer does the same). Each replica's memory is an
LRU bounded by ``capacity_blocks``, standing in for the replica's own LRU eviction. A caller
that knows a replica's KV cache size passes it per record, and the blocks the request will
write besides its prompt (its output) as ``other_blocks``: they push older prefixes out just
as they do in the engine, so a prefix the cache has since evicted stops matching.
"""

from __future__ import annotations

from collections import OrderedDict

DEFAULT_CAPACITY_BLOCKS = 100_000


class PrefixIndex:
    def __init__(self, capacity_blocks: int = DEFAULT_CAPACITY_BLOCKS) -> None:
        self.capacity_blocks = capacity_blocks
        # per replica: block hash (or an anonymous key) -> blocks it stands for, oldest first
        self._blocks: dict[str, OrderedDict[object, float]] = {}
        self._size: dict[str, float] = {}
        self._num_other = 0

    def match(self, replica: str, prefix_hashes: tuple[int, ...]) -> int:
        """How many leading blocks of ``prefix_hashes`` the replica is believed to hold."""
        blocks = self._blocks.get(replica)
        if not blocks:
            return 0
        n = 0
        for h in prefix_hashes:
            if h not in blocks:
                break
            n += 1
        return n

    def record(
        self,
        replica: str,
        prefix_hashes: tuple[int, ...],
        *,
        other_blocks: float = 0.0,
        capacity_blocks: float | None = None,
    ) -> None:
        """The replica is about to hold these blocks (most recently used last).

        Args:
            replica: where the request goes.
            prefix_hashes: its prompt's blocks.
            other_blocks: blocks it writes that no later prompt matches (its output).
            capacity_blocks: the replica's cache size (default: the index's).
        """
        blocks = self._blocks.setdefault(replica, OrderedDict())
        size = self._size.get(replica, 0.0)
        for h in prefix_hashes:
            if h not in blocks:
                blocks[h] = 1.0
                size += 1.0
            blocks.move_to_end(h)
        if other_blocks > 0:
            self._num_other += 1
            blocks[("other", self._num_other)] = other_blocks
            size += other_blocks
        capacity = self.capacity_blocks if capacity_blocks is None else capacity_blocks
        while size > capacity and blocks:
            size -= blocks.popitem(last=False)[1]
        self._size[replica] = size
