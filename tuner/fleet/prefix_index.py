"""Which prefix blocks each replica probably holds, learnt from where requests were sent.

The router cannot see a replica's cache, so it remembers the blocks of the prompts it sent
there (llm-d's approximate prefix-cache scorer does the same). Each replica's memory is an
LRU bounded by ``capacity_blocks``, standing in for the replica's own LRU eviction.
"""

from __future__ import annotations

from collections import OrderedDict

DEFAULT_CAPACITY_BLOCKS = 100_000


class PrefixIndex:
    def __init__(self, capacity_blocks: int = DEFAULT_CAPACITY_BLOCKS) -> None:
        self.capacity_blocks = capacity_blocks
        self._blocks: dict[str, OrderedDict[int, None]] = {}

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

    def record(self, replica: str, prefix_hashes: tuple[int, ...]) -> None:
        """The replica is about to hold these blocks (most recently used last)."""
        blocks = self._blocks.setdefault(replica, OrderedDict())
        for h in prefix_hashes:
            blocks[h] = None
            blocks.move_to_end(h)
        while len(blocks) > self.capacity_blocks:
            blocks.popitem(last=False)
