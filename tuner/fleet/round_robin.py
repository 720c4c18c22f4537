"""``round-robin``: each replica in turn, blind to load (the baseline every router starts from)."""

from __future__ import annotations

from collections.abc import Sequence

from slotune.tuner.fleet._base import PolicyBase, no_replica
from slotune.tuner.fleet.policy import Decision, ReplicaState, RequestInfo


class RoundRobin(PolicyBase):
    name = "round-robin"

    def __init__(self) -> None:
        self._count = 0

    def choose(self, request: RequestInfo, replicas: Sequence[ReplicaState]) -> Decision:
        if not replicas:
            return no_replica(request)
        replica = replicas[self._count % len(replicas)]
        self._count += 1
        return Decision(replica.name)
