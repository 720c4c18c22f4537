"""``prefix-affinity``: consistent hashing of the prompt's first blocks, bounded by load.

Requests that share their first prefix blocks (a conversation's turns, one system prompt)
hash to the same replica, whose prefix cache then already holds them. The hash ring has
``vnodes`` points per replica, so adding or removing one replica moves only its share of
keys. The load bound is consistent hashing with bounded loads (Mirrokni, Thorup and
Zadimoghaddam, 2018): a replica takes a request only while it holds fewer than
``ceil(load_factor * (total + 1) / n)`` requests; otherwise the walk goes on clockwise, so a
hot prefix spills over to the next replicas instead of melting one.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Sequence

from slotune.collector.errors import ConfigError
from slotune.tuner.fleet._base import PolicyBase, Rotation, no_replica
from slotune.tuner.fleet.policy import Decision, ReplicaState, RequestInfo

DEFAULT_LOAD_FACTOR = 1.25
DEFAULT_PREFIX_BLOCKS = 2
_VNODES = 64


def _point(data: bytes) -> int:
    # a stable hash: Python's str hash changes between processes
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def affinity_key(request: RequestInfo, prefix_blocks: int) -> bytes | None:
    """What pins a request: its session, else its first prefix blocks; None when neither."""
    if request.session_id is not None:
        return b"s" + request.session_id.encode()
    if request.prefix_hashes:
        return b"p" + repr(request.prefix_hashes[:prefix_blocks]).encode()
    return None


class PrefixAffinity(PolicyBase):
    """Args:
    load_factor: how far above the mean load a replica may go before keys spill (> 1).
    prefix_blocks: leading prefix blocks that make the key when no session id is known.
    """

    name = "prefix-affinity"

    def __init__(
        self, load_factor: float = DEFAULT_LOAD_FACTOR, prefix_blocks: int = DEFAULT_PREFIX_BLOCKS
    ) -> None:
        if load_factor <= 1.0:
            raise ConfigError(f"prefix-affinity load={load_factor}: use a factor above 1")
        if prefix_blocks < 1:
            raise ConfigError(f"prefix-affinity blocks={prefix_blocks}: use at least 1")
        self.load_factor = load_factor
        self.prefix_blocks = prefix_blocks
        self._names: tuple[str, ...] = ()
        self._points: list[int] = []
        self._owners: list[int] = []
        self._rotation = Rotation()

    def choose(self, request: RequestInfo, replicas: Sequence[ReplicaState]) -> Decision:
        if not replicas:
            return no_replica(request)
        key = affinity_key(request, self.prefix_blocks)
        if key is None:
            # nothing to be affine to: spread like least-requests
            return Decision(self._rotation.least(replicas, lambda r: r.load))
        return Decision(self.home(key, replicas).name)

    def home(self, key: bytes, replicas: Sequence[ReplicaState]) -> ReplicaState:
        """The first replica clockwise from ``key`` on the ring that is under the load bound."""
        self._build(replicas)
        n = len(replicas)
        total = sum(r.load for r in replicas)
        bound = math.ceil(self.load_factor * (total + 1) / n)
        start = bisect.bisect(self._points, _point(key))
        seen: set[int] = set()
        for j in range(len(self._points)):
            owner = self._owners[(start + j) % len(self._points)]
            if owner in seen:
                continue
            seen.add(owner)
            if replicas[owner].load + 1 <= bound:
                return replicas[owner]
        raise AssertionError("unreachable: the least-loaded replica is under the bound")

    def _build(self, replicas: Sequence[ReplicaState]) -> None:
        names = tuple(r.name for r in replicas)
        if names == self._names:
            return
        ring = sorted(
            (_point(f"{name}#{v}".encode()), i)
            for i, name in enumerate(names)
            for v in range(_VNODES)
        )
        self._names = names
        self._points = [p for p, _ in ring]
        self._owners = [i for _, i in ring]
