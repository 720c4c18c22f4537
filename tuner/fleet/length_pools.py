"""``length-pools``: long requests to the long pool, short ones to the short pool.

A request is long when its input plus expected output tokens exceed the threshold. Long
requests go only to the long pools (shed when none is up): a long prompt in a short pool is
exactly the head-of-line blocking the split exists to avoid. Short requests go to the short
pools, and to the long pools only when no short replica is up. Inside a pool the choice is
least-requests.

Without a threshold, the fleet simulator fits one to the trace
(:func:`slotune.tuner.fleet.simulator.fit_length_threshold`), starting from the split of the
trace's token work in proportion to the pools' capacities (:func:`length_threshold`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.tuner.fleet._base import PolicyBase, no_replica
from slotune.tuner.fleet.least_requests import LeastRequests
from slotune.tuner.fleet.policy import Decision, ReplicaState, RequestInfo


def length_threshold(total_tokens: Sequence[int] | np.ndarray, long_share: float) -> float:
    """The length above which requests carry ``long_share`` of all tokens.

    Args:
        total_tokens: input + output tokens of each request of the trace.
        long_share: the long pools' share of the fleet's capacity, in (0, 1).

    Returns:
        A threshold in tokens: requests strictly above it are long.
    """
    if not 0.0 < long_share < 1.0:
        raise ConfigError(f"long pool share {long_share}: needs both pools, a share in (0, 1)")
    t = np.sort(np.asarray(total_tokens, dtype=float))
    if t.size == 0:
        raise ConfigError("the trace is empty: no length distribution to split")
    # work above each candidate threshold t[i] = sum of t[i+1:]
    above = t.sum() - np.cumsum(t)
    i = int(np.argmin(np.abs(above - long_share * t.sum())))
    return float(t[i])


class LengthPools(PolicyBase):
    """Args:
    threshold_tokens: requests with input + expected output above this are long.
    long_pools: names of the pools that take long requests; every other pool is short.
    """

    name = "length-pools"

    def __init__(self, threshold_tokens: float, long_pools: frozenset[str]) -> None:
        if threshold_tokens <= 0:
            raise ConfigError(f"length-pools threshold={threshold_tokens}: use a positive count")
        if not long_pools:
            raise ConfigError("length-pools needs a long pool: pass length-pools:long=POOL")
        self.threshold_tokens = threshold_tokens
        self.long_pools = long_pools
        self._long = LeastRequests()
        self._short = LeastRequests()

    def is_long(self, request: RequestInfo) -> bool:
        return request.input_tokens + request.expected_output_tokens > self.threshold_tokens

    def choose(self, request: RequestInfo, replicas: Sequence[ReplicaState]) -> Decision:
        long = [r for r in replicas if r.pool in self.long_pools]
        if self.is_long(request):
            if not long:
                return Decision(None, shed_reason="no long-pool replica is up for a long request")
            return self._long.choose(request, long)
        short = [r for r in replicas if r.pool not in self.long_pools]
        if short:
            return self._short.choose(request, short)
        return self._long.choose(request, long) if long else no_replica(request)
