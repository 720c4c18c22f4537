"""What the policies share: a no-op ``on_finish``, the no-replica decision, rotating ties,
least-of-a-key choice."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from slotune.tuner.fleet.policy import Decision, ReplicaState, RequestInfo


class PolicyBase:
    """A policy that learns nothing from finished requests (most of them)."""

    name: str = ""

    def on_finish(self, request: RequestInfo, replica: str, output_tokens: int) -> None:
        return None


def no_replica(request: RequestInfo) -> Decision:
    return Decision(None, shed_reason=f"no healthy replica serves model {request.model!r}")


class Rotation:
    """Breaks ties by a rotating start, so an idle fleet is not all sent to its first replica."""

    def __init__(self) -> None:
        self._next = 0

    def least(self, replicas: Sequence[ReplicaState], key: Callable[[ReplicaState], Any]) -> str:
        """The name of the replica with the smallest ``key``; among equals, the next in turn."""
        n = len(replicas)
        start = self._next % n
        self._next += 1
        best = replicas[start]
        best_key = key(best)
        for i in range(1, n):
            r = replicas[(start + i) % n]
            k = key(r)
            if k < best_key:
                best, best_key = r, k
        return best.name


class LeastBy(PolicyBase):
    """The replica with the smallest :meth:`key`, ties broken in turn."""

    def __init__(self) -> None:
        self._rotation = Rotation()

    @staticmethod
    def key(replica: ReplicaState) -> Any:
        raise NotImplementedError

    def choose(self, request: RequestInfo, replicas: Sequence[ReplicaState]) -> Decision:
        if not replicas:
            return no_replica(request)
        return Decision(self._rotation.least(replicas, self.key))
