"""``least-kv``: the replica with the most free KV cache (fewest requests among equals).

KV usage, not request count, is what makes a new request wait on an LLM replica: one long
prompt can fill a replica that holds a single request.
"""

from __future__ import annotations

from slotune.tuner.fleet._base import LeastBy
from slotune.tuner.fleet.policy import ReplicaState


class LeastKv(LeastBy):
    name = "least-kv"

    @staticmethod
    def key(replica: ReplicaState) -> tuple[float, int]:
        return (replica.kv_usage, replica.load)
