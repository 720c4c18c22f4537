"""``prefix-affinity``: stick to the replica whose KV cache will still hold the prompt's prefix.

Requests that share their first prefix blocks (a conversation's turns, one system prompt) gain
from landing where those blocks are cached, but only while they are still cached, and only
by the prefill the hit saves. So the policy weighs, per replica, like llm-d's scheduler
weighs its prefix-cache, queue and KV-utilisation scorers:

- the expected hit: the leading prompt blocks the replica still holds, as an LRU as large as
  the replica's KV cache remembers them from the requests sent there (their prompts, then
  their outputs pushing older blocks out). A prefix that the traffic since has evicted no
  longer counts, so stickiness never pays for a hit that will be gone. A replica whose free
  KV cache cannot take the request's new blocks gets no credit: the request would wait there;
- the queue: the requests the replica holds (running + waiting), what least-requests
  balances.

The replica with the lowest ``load - hit x hit_tokens / mean prompt tokens`` wins: a hit
of a whole average prompt is worth ``hit`` requests of queue. With no hit anywhere (no
prefix, or every copy evicted) that is least-requests. Ties go to the prompt's home on a
consistent-hash ring (``vnodes`` points per replica, keyed by the session, else the first
``blocks`` prefix blocks), so first turns of one conversation meet on one replica and
adding or removing a replica moves only its share of keys. Credit is bounded as in
consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, 2018): a replica
holding ``ceil(load_factor * (total + 1) / n)`` requests or more gets none, so a hot prefix
spills over instead of melting one replica.

Without a KV size (an engine that does not publish one to the proxy), the LRU holds the
index's default number of blocks and the queue term alone keeps the choice honest.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Sequence

from slotune.collector.errors import ConfigError
from slotune.tuner.fleet._base import PolicyBase, Rotation, no_replica
from slotune.tuner.fleet.policy import Decision, ReplicaState, RequestInfo
from slotune.tuner.fleet.prefix_index import PrefixIndex

DEFAULT_LOAD_FACTOR = 1.25
DEFAULT_PREFIX_BLOCKS = 2
DEFAULT_HIT_WEIGHT = 1.0
_VNODES = 64
# weight of the newest prompt in the mean prompt length
_MEAN_EWMA = 0.01


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


def _block_tokens(request: RequestInfo) -> float | None:
    """Prompt tokens per prefix block; None when the prompt has no blocks (or no tokens)."""
    if not request.prefix_hashes or request.input_tokens <= 0:
        return None
    return request.input_tokens / len(request.prefix_hashes)


class PrefixAffinity(PolicyBase):
    """Args:
    load_factor: how far above the mean load a replica may go and still earn a hit (> 1).
    prefix_blocks: leading prefix blocks that make the key when no session id is known.
    hit_weight: requests of queue a hit of one mean prompt is worth (> 0).
    """

    name = "prefix-affinity"

    def __init__(
        self,
        load_factor: float = DEFAULT_LOAD_FACTOR,
        prefix_blocks: int = DEFAULT_PREFIX_BLOCKS,
        hit_weight: float = DEFAULT_HIT_WEIGHT,
    ) -> None:
        if load_factor <= 1.0:
            raise ConfigError(f"prefix-affinity load={load_factor}: use a factor above 1")
        if prefix_blocks < 1:
            raise ConfigError(f"prefix-affinity blocks={prefix_blocks}: use at least 1")
        if not hit_weight > 0 or math.isinf(hit_weight):
            raise ConfigError(f"prefix-affinity hit={hit_weight}: use a positive number, e.g. 1")
        self.load_factor = load_factor
        self.prefix_blocks = prefix_blocks
        self.hit_weight = hit_weight
        self.index = PrefixIndex()
        self._mean_prompt = 0.0
        self._names: tuple[str, ...] = ()
        self._points: list[int] = []
        self._owners: list[int] = []
        self._rotation = Rotation()

    def choose(self, request: RequestInfo, replicas: Sequence[ReplicaState]) -> Decision:
        if not replicas:
            return no_replica(request)
        self._mean_prompt += (
            _MEAN_EWMA * (request.input_tokens - self._mean_prompt)
            if self._mean_prompt
            else request.input_tokens
        )
        bound = self._bound(replicas)
        credit = {
            r.name: self.hit_weight
            * self.expected_hit_tokens(request, r)
            / max(self._mean_prompt, 1.0)
            if r.load + 1 <= bound
            else 0.0
            for r in replicas
        }
        cost = {r.name: r.load - credit[r.name] for r in replicas}
        # no copy of the prefix anywhere: the home on the ring gathers its first requests
        key = affinity_key(request, self.prefix_blocks) if not any(credit.values()) else None
        home = self.home(key, replicas).name if key is not None else None
        name = self._rotation.least(replicas, lambda r: (cost[r.name], r.name != home))
        self._record(request, next(r for r in replicas if r.name == name))
        return Decision(name)

    def expected_hit_tokens(self, request: RequestInfo, replica: ReplicaState) -> float:
        """Prompt tokens ``replica`` will probably find cached: none when its free KV cache
        cannot take the rest of the request."""
        block_tokens = _block_tokens(request)
        if block_tokens is None:
            return 0.0
        hit = min(
            self.index.match(replica.name, request.prefix_hashes) * block_tokens,
            request.input_tokens,
        )
        capacity = replica.kv_capacity_tokens
        if hit and capacity:
            needed = request.input_tokens - hit + request.expected_output_tokens
            if replica.kv_usage * capacity + needed > capacity:
                return 0.0
        return hit

    def _record(self, request: RequestInfo, replica: ReplicaState) -> None:
        block_tokens = _block_tokens(request)
        if block_tokens is None:
            return
        capacity = replica.kv_capacity_tokens
        self.index.record(
            replica.name,
            request.prefix_hashes,
            other_blocks=request.expected_output_tokens / block_tokens,
            capacity_blocks=capacity / block_tokens if capacity else None,
        )

    def _bound(self, replicas: Sequence[ReplicaState]) -> int:
        total = sum(r.load for r in replicas)
        return math.ceil(self.load_factor * (total + 1) / len(replicas))

    def home(self, key: bytes, replicas: Sequence[ReplicaState]) -> ReplicaState:
        """The first replica clockwise from ``key`` on the ring that is under the load bound."""
        self._build(replicas)
        bound = self._bound(replicas)
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
