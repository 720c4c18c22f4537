"""``slo-aware``: admission on top of any policy, by predicted queueing delay vs the TTFT budget.

A request waits behind the prompt tokens already queued on its replica, at the replica's live
prefill rate ``waiting tokens / prefill_tps`` seconds, and behind the requests queued ahead,
which leave at the rate the replica starts them (``waiting / start_rate_rps``); the
prediction is the longer of the two. When the inner policy's pick would exceed
``margin x`` the TTFT budget, the replica of the same pool with the shortest predicted wait
is tried; when every replica of that pool would, the request is shed (HTTP 429) with
``Retry-After`` = the predicted excess. The threshold follows each replica's measured rate,
not a fixed queue length, so a fast replica admits a longer queue than a slow one.
"""

from __future__ import annotations

from collections.abc import Sequence

from slotune.collector.errors import ConfigError
from slotune.tuner.fleet.policy import Decision, ReplicaState, RequestInfo, RoutingPolicy

DEFAULT_MARGIN = 1.0


def predicted_queueing_s(replica: ReplicaState, input_tokens: int) -> float:
    """Seconds a new request would wait on ``replica`` before its own prefill starts.

    The longer of two waits: computing the prompts queued ahead at the prefill rate, and,
    when requests wait, the queue ahead leaving at the rate the replica has lately been
    starting requests (which covers waits for a free sequence slot or KV blocks too). The
    request's own prefill is left out: it is not load, and shedding cannot shorten it.
    0 when the replica's rates are unknown.

    Args:
        replica: the replica's load.
        input_tokens: the request's prompt length, standing in for each waiting prompt
            when the replica does not report its waiting tokens.
    """
    wait = 0.0
    rate = replica.prefill_tps or replica.throughput_tps
    if rate > 0.0:
        queued = replica.num_waiting_tokens or replica.num_waiting * input_tokens
        wait = queued / rate
    if replica.num_waiting and replica.start_rate_rps > 0.0:
        wait = max(wait, replica.num_waiting / replica.start_rate_rps)
    return wait


class SloAware:
    """Args:
    inner: the policy that picks among admitted replicas.
    ttft_budget_s: the TTFT SLO threshold.
    margin: admit while the predicted wait is at most ``margin x ttft_budget_s``.
    """

    def __init__(self, inner: RoutingPolicy, ttft_budget_s: float, margin: float = DEFAULT_MARGIN):
        if ttft_budget_s <= 0:
            raise ConfigError("slo-aware needs a TTFT budget: pass --slo ttft:p99<=500ms")
        if margin <= 0:
            raise ConfigError(f"slo-aware margin={margin}: use a positive factor")
        self.inner = inner
        self.name = f"slo-aware:{inner.name}"
        self.limit_s = ttft_budget_s * margin

    def choose(self, request: RequestInfo, replicas: Sequence[ReplicaState]) -> Decision:
        decision = self.inner.choose(request, replicas)
        if decision.shed:
            return decision
        picked = next(r for r in replicas if r.name == decision.replica)
        if predicted_queueing_s(picked, request.input_tokens) <= self.limit_s:
            return decision
        # only the pick's pool: the inner policy may keep requests off other pools
        same_pool = [r for r in replicas if r.pool == picked.pool]
        best = min(same_pool, key=lambda r: predicted_queueing_s(r, request.input_tokens))
        wait = predicted_queueing_s(best, request.input_tokens)
        if wait <= self.limit_s:
            return Decision(best.name)
        return Decision(
            None,
            shed_reason=f"predicted queueing {wait:.2f}s exceeds the TTFT budget "
            f"{self.limit_s:.2f}s on every replica of its pool",
            retry_after_s=wait - self.limit_s,
        )

    def on_finish(self, request: RequestInfo, replica: str, output_tokens: int) -> None:
        self.inner.on_finish(request, replica, output_tokens)
