"""A fleet of simulated replicas behind one router, on one clock.

Arrivals are routed in order: every replica first runs the steps that start before the
arrival, then the policy sees each replica's load as it is at that moment and names one (or
sheds). Replicas can be added (ready after a cold start) and drained while the trace runs,
which is what the autoscaling replay does between arrivals. Replicas can also fail
(:mod:`slotune.tuner.fleet.health`): the router then sees them through the proxy's circuit
breakers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from slotune.collector.records import RequestRecord
from slotune.collector.workload import TraceRequest
from slotune.tuner.fleet.estimator import OutputLengthEstimator
from slotune.tuner.fleet.health import FleetHealth, OutageKind
from slotune.tuner.fleet.policy import ReplicaState, RequestInfo, RoutingPolicy
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
    health: replica outages and the circuit breakers facing them (none: replicas never fail).
    """

    def __init__(
        self,
        pools: Sequence[PoolSpec],
        policy: RoutingPolicy,
        *,
        known_output: bool = False,
        health: FleetHealth | None = None,
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
        # requests that failed upstream: HTTP status and detail
        self.failed: dict[str, tuple[int, str]] = {}
        self.health = health
        self._clock_s = 0.0
        for pool in pools:
            for _ in range(pool.replicas):
                self.add_replica(pool.name, 0.0)
        if health is not None:
            health.check_names([r.name for r in self.replicas])
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
        """Run every replica up to ``until_s`` and tell the policy about finished requests;
        a replica whose outage begins on the way loses what it holds at that instant."""
        if self.health is not None:
            for outage in self.health.starting(self._clock_s, until_s):
                self._run_to(outage.at_s)
                self._crash(outage.replica, outage.at_s)
        self._run_to(until_s)

    def _run_to(self, until_s: float) -> None:
        self._clock_s = max(self._clock_s, until_s)
        for replica in self.replicas:
            for rid in replica.advance(until_s):
                done = self._in_flight.pop(rid)
                self.estimator.observe(done.info.model, done.info.client_key, done.output_tokens)
                self.policy.on_finish(done.info, done.replica, done.output_tokens)
                if self.health is not None:
                    self.health.on_success(done.replica)

    def _crash(self, name: str, now_s: float) -> None:
        assert self.health is not None
        replica = next((r for r in self.replicas if r.name == name), None)
        if replica is None:
            return  # drained before its outage
        for rid in replica.crash(now_s):
            self._in_flight.pop(rid, None)
            self.health.on_failure(name, now_s)  # a stream cut short counts

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
        replica = self._choose(request, info, serving, now_s)
        if replica is None:
            return
        try:
            replica.admit(request, now_s)
        except RequestRejected as e:
            self.rejected[request.request_id] = str(e)
            return
        self._in_flight[request.request_id] = _InFlight(info, replica.name, request.max_tokens)

    def _choose(
        self, request: SimRequest, info: RequestInfo, serving: list[Replica], now_s: float
    ) -> Replica | None:
        """The replica that takes the request, as the proxy picks it: among those whose
        circuit lets requests through, retrying elsewhere after a refused connection; None
        when it was shed or failed (recorded)."""
        health = self.health
        rid = request.request_id
        if health is not None:
            open_ = [r for r in serving if health.can_send(r.name, now_s)]
            if serving and not open_:
                self.failed[rid] = (503, "every replica's circuit is open")
                return None
            serving = open_
        tried: list[str] = []
        while True:
            candidates = [r for r in serving if r.name not in tried]
            if tried and not candidates:
                self.failed[rid] = (502, f"no replica answered ({', '.join(tried)})")
                return None
            decision = self.policy.choose(info, [self._state(r) for r in candidates])
            if decision.replica is None:
                self.shed[rid] = decision.shed_reason
                return None
            replica = next(r for r in candidates if r.name == decision.replica)
            outage = None if health is None else health.outage(replica.name, now_s)
            if health is None or outage is None:
                if health is not None:
                    health.on_send(replica.name, now_s)
                return replica
            health.on_send(replica.name, now_s)
            if outage.kind is OutageKind.HANG:
                health.on_hung(replica.name, now_s)
                self.failed[rid] = (504, f"replica {replica.name} did not answer in time")
                return None
            health.on_refused(replica.name, now_s)
            tried.append(replica.name)

    def _state(self, replica: Replica) -> ReplicaState:
        state = replica.state()
        if self.health is None:
            return state
        # the proxy counts what it sent and has not heard back about: a hung replica's
        # requests keep it looking busy
        hung = self.health.num_hung(replica.name)
        return replace(state, num_waiting=state.num_waiting + hung) if hung else state

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
            failed = self.failed.get(r.request_id)
            if found is None and failed is not None:
                status, detail = failed
                out.append(
                    RequestRecord(
                        request_id=r.request_id,
                        send_s=r.arrival_s,
                        first_token_s=None,
                        end_s=None,
                        input_tokens=r.prompt_tokens,
                        error="http_5xx",
                        error_detail=detail,
                        http_status=status,
                        scheduled_s=r.arrival_s,
                    )
                )
            elif found is None:
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
