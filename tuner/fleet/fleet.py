"""A fleet of simulated replicas behind one router, on one clock.

Arrivals are routed in order: every replica first runs the steps that start before the
arrival, then the policy sees each replica's load as it is at that moment and names one (or
sheds). Replicas can be added (ready after a cold start) and drained while the trace runs,
which is what the autoscaling replay does between arrivals.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from slotune.collector.records import RequestRecord
from slotune.collector.workload import TraceRequest
from slotune.tuner.fleet.estimator import OutputLengthEstimator
from slotune.tuner.fleet.policy import RequestInfo, RoutingPolicy
from slotune.tuner.fleet.pools import PoolSpec
from slotune.tuner.fleet.replica import Replica
from slotune.tuner.sim import RequestRejected, SimRequest

SHED_ERROR = "shed"


@dataclass(frozen=True, slots=True)
class _InFlight:
    info: RequestInfo
    replica: str
    output_tokens: int


class Fleet:
    """Args:
    pools: the pools at the start (``replicas`` each, ready at once).
    policy: the router's policy.
    known_output: the router knows each request's output length (clients send
        ``max_tokens`` equal to it); otherwise it estimates it from finished requests.
    """

    def __init__(
        self, pools: Sequence[PoolSpec], policy: RoutingPolicy, *, known_output: bool = False
    ) -> None:
        self.pools = {p.name: p for p in pools}
        self._configs = {p.name: p.resolved() for p in pools}
        self.policy = policy
        self.known_output = known_output
        self.estimator = OutputLengthEstimator()
        self.replicas: list[Replica] = []
        self.retired: list[Replica] = []
        self._counts: Counter[str] = Counter()
        self._in_flight: dict[str, _InFlight] = {}
        self.shed: dict[str, str] = {}
        self.rejected: dict[str, str] = {}
        for pool in pools:
            for _ in range(pool.replicas):
                self.add_replica(pool.name, 0.0)
        self.default_model = self._configs[pools[0].name].model.id

    # the fleet's shape
    def add_replica(self, pool: str, ready_s: float, started_s: float | None = None) -> Replica:
        """Launch one more replica of ``pool`` at ``started_s``, serving from ``ready_s`` on."""
        i = self._counts[pool]
        self._counts[pool] += 1
        replica = Replica(f"{pool}-{i}", pool, self._configs[pool], ready_s, started_s)
        self.replicas.append(replica)
        return replica

    def retire_idle(self, now_s: float) -> None:
        """Stop the draining replicas that have finished their last request."""
        for r in [r for r in self.replicas if r.draining and r.is_idle]:
            # one drained while still loading stops now, not when it would have been ready
            r.stopped_s = now_s if r.ready_s > now_s else max(now_s, r.clock_s)
            self.replicas.remove(r)
            self.retired.append(r)

    # time
    def advance(self, until_s: float) -> None:
        """Run every replica up to ``until_s`` and tell the policy about finished requests."""
        for replica in self.replicas:
            for rid in replica.advance(until_s):
                done = self._in_flight.pop(rid)
                self.estimator.observe(done.info.model, done.info.client_key, done.output_tokens)
                self.policy.on_finish(done.info, done.replica, done.output_tokens)

    def run_until_idle(self) -> None:
        self.advance(math.inf)

    # requests
    def route(self, request: SimRequest, source: TraceRequest, now_s: float) -> None:
        """Route one arrival at ``now_s`` (replicas already advanced to it)."""
        model = source.model or self.default_model
        info = RequestInfo(
            request_id=request.request_id,
            model=model,
            input_tokens=request.prompt_tokens,
            expected_output_tokens=float(request.max_tokens)
            if self.known_output
            else self.estimator.expected(model, None, None),
            max_tokens=request.max_tokens if self.known_output else None,
            prefix_hashes=request.hash_ids,
            session_id=source.session_id,
        )
        live = [r for r in self.replicas if r.ready_s <= now_s and not r.draining]
        serving = [r for r in live if r.model == model] or live
        by_name = {r.name: r for r in serving}
        decision = self.policy.choose(info, [r.state() for r in serving])
        if decision.replica is None:
            self.shed[request.request_id] = decision.shed_reason
            return
        replica = by_name[decision.replica]
        try:
            replica.admit(request, now_s)
        except RequestRejected as e:
            self.rejected[request.request_id] = str(e)
            return
        self._in_flight[request.request_id] = _InFlight(info, replica.name, request.max_tokens)

    def records(self, requests: Sequence[SimRequest]) -> list[RequestRecord]:
        """One record per request, in trace order: served, refused (400) or shed (429)."""
        by_id = {r.request_id: r for r in requests}
        served: dict[str, RequestRecord] = {}
        for replica in (*self.replicas, *self.retired):
            for record in replica.records(by_id):
                served[record.request_id] = record
        out = []
        for r in requests:
            found = served.get(r.request_id)
            if found is None:
                shed = r.request_id in self.shed
                out.append(
                    RequestRecord(
                        request_id=r.request_id,
                        send_s=r.arrival_s,
                        first_token_s=None,
                        end_s=None,
                        input_tokens=r.prompt_tokens,
                        error=SHED_ERROR if shed else "http_4xx",
                        error_detail=self.shed[r.request_id]
                        if shed
                        else self.rejected[r.request_id],
                        http_status=429 if shed else 400,
                        scheduled_s=r.arrival_s,
                    )
                )
            else:
                out.append(found)
        return out
