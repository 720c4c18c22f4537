"""``least-requests``: the replica holding the fewest requests (running + waiting)."""

from __future__ import annotations

from slotune.tuner.fleet._base import LeastBy
from slotune.tuner.fleet.policy import ReplicaState


class LeastRequests(LeastBy):
    name = "least-requests"

    @staticmethod
    def key(replica: ReplicaState) -> int:
        return replica.load
