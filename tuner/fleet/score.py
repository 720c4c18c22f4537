"""``score``: llm-d style weighted scorers — prefix cache, queue, KV usage.

Each scorer maps a replica to [0, 1] (higher is better); the replica with the highest
weighted sum wins (llm-d's defaults: prefix 3, queue 1, KV 1):

- prefix: the share of the request's prefix blocks the replica is believed to hold
  (:class:`~slotune.tuner.fleet.prefix_index.PrefixIndex`);
- queue: ``(max_waiting - waiting) / (max_waiting - min_waiting)`` over the candidates
  (1 for all when they are equal), llm-d's min-max normalised queue scorer;
- kv: ``1 - kv_usage``.
"""

from __future__ import annotations

from collections.abc import Sequence

from slotune.collector.errors import ConfigError
from slotune.tuner.fleet._base import PolicyBase, Rotation, no_replica
from slotune.tuner.fleet.policy import Decision, ReplicaState, RequestInfo
from slotune.tuner.fleet.prefix_index import PrefixIndex

DEFAULT_WEIGHTS = (3.0, 1.0, 1.0)


class Score(PolicyBase):
    """Args:
    prefix_weight, queue_weight, kv_weight: the scorers' weights (>= 0, not all 0).
    index: where the prefix scorer remembers which replica holds which blocks.
    """

    name = "score"

    def __init__(
        self,
        prefix_weight: float = DEFAULT_WEIGHTS[0],
        queue_weight: float = DEFAULT_WEIGHTS[1],
        kv_weight: float = DEFAULT_WEIGHTS[2],
        index: PrefixIndex | None = None,
    ) -> None:
        weights = (prefix_weight, queue_weight, kv_weight)
        if min(weights) < 0 or max(weights) == 0:
            raise ConfigError(
                f"score weights prefix={prefix_weight} queue={queue_weight} kv={kv_weight}: "
                "use non-negative weights, at least one above 0"
            )
        self.weights = weights
        self.index = index if index is not None else PrefixIndex()
        self._rotation = Rotation()

    def scores(self, request: RequestInfo, replicas: Sequence[ReplicaState]) -> list[float]:
        """Each candidate's weighted score, in the order of ``replicas``."""
        wp, wq, wk = self.weights
        queues = [r.num_waiting for r in replicas]
        lo, hi = min(queues), max(queues)
        num_blocks = len(request.prefix_hashes)
        out = []
        for r, q in zip(replicas, queues, strict=True):
            prefix = (
                self.index.match(r.name, request.prefix_hashes) / num_blocks if num_blocks else 0.0
            )
            queue = (hi - q) / (hi - lo) if hi > lo else 1.0
            out.append(wp * prefix + wq * queue + wk * (1.0 - r.kv_usage))
        return out

    def choose(self, request: RequestInfo, replicas: Sequence[ReplicaState]) -> Decision:
        if not replicas:
            return no_replica(request)
        by_name = dict(zip((r.name for r in replicas), self.scores(request, replicas), strict=True))
        name = self._rotation.least(replicas, lambda r: -by_name[r.name])
        self.index.record(name, request.prefix_hashes)
        return Decision(name)
