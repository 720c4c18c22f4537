"""One simulated replica in a fleet: an engine core on the fleet's clock, and what it served.

The replica advances its own core up to a time the fleet names (the next arrival or tick);
a request routed to it at time ``t`` joins the first step that starts at or after ``t``, as
in the single-engine simulator. Token times are kept as runs of step indices per request
and resolved against the step end times once, at the end.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from slotune.collector.records import RequestRecord
from slotune.tuner.fleet.policy import ReplicaState
from slotune.tuner.sim import EngineCore, ResolvedConfig, SimRequest

# Weight of the newest step in the live throughput averages (about the last 50 steps).
_EWMA = 0.02
# Time constant of the live start rate (what slo-aware's queue prediction reads), and the
# queued time it needs before it is trusted.
_START_TAU_S = 10.0
_MIN_QUEUED_S = 1.0


class Replica:
    """Args:
    name: unique in the fleet (``POOL-i``).
    pool: its pool's name.
    config: the resolved engine configuration.
    ready_s: when it can serve (a cold start delays this).
    started_s: when it was launched (default ``ready_s``).
    """

    def __init__(
        self,
        name: str,
        pool: str,
        config: ResolvedConfig,
        ready_s: float = 0.0,
        started_s: float | None = None,
    ) -> None:
        self.name = name
        self.pool = pool
        self.model = config.model.id
        self.core = EngineCore.create(config)
        self.kv_capacity_tokens = self.core.stats.kv_tokens
        self.gpus = self.core.view.tensor_parallel_size
        self.clock_s = ready_s
        self.ready_s = ready_s
        # GPU time counts from the launch: loading the model holds the GPU too
        self.started_s = ready_s if started_s is None else started_s
        self.stopped_s: float | None = None
        self.draining = False
        self.step_end_s: list[float] = []
        self.busy_s = 0.0
        self.num_routed = 0
        self._runs: dict[str, list[int]] = {}
        self._started: dict[str, float] = {}
        self._waiting_tokens: dict[str, int] = {}
        self._num_waiting_tokens = 0
        budget = self.core.view.token_budget
        # the rate a queue drains at, from the cost model until steps measure it
        self.prefill_tps = budget / self.core.cost.step_time_s(budget, budget * budget / 2, 0, 0, 1)
        self.throughput_tps = 0.0
        self._stuck = False
        self._cut: dict[str, str] = {}  # requests lost when the replica failed: why
        self._queued_starts = 0.0
        self._queued_s = 0.0

    # routing
    def state(self) -> ReplicaState:
        s = self.core.stats
        return ReplicaState(
            name=self.name,
            pool=self.pool,
            model=self.model,
            num_running=s.num_running,
            num_waiting=s.num_waiting,
            kv_usage=s.kv_usage,
            throughput_tps=self.throughput_tps,
            num_waiting_tokens=self._num_waiting_tokens,
            prefill_tps=self.prefill_tps,
            start_rate_rps=self.start_rate_rps,
            kv_capacity_tokens=self.kv_capacity_tokens,
        )

    def admit(self, request: SimRequest, now_s: float) -> None:
        """Queue a request that arrived at ``now_s``.

        Raises:
            RequestRejected: the engine refuses it (too long).
        """
        self.core.add_request(request)
        self._stuck = False
        self.num_routed += 1
        self.clock_s = max(self.clock_s, now_s)
        self._runs[request.request_id] = []
        self._waiting_tokens[request.request_id] = request.prompt_tokens
        self._num_waiting_tokens += request.prompt_tokens

    def crash(self, now_s: float) -> list[str]:
        """The replica fails at ``now_s``: every request it holds is lost; returns their ids."""
        lost = [rid for rid in self._runs if rid not in self._cut and self.core.abort(rid)]
        for rid in lost:
            self._cut[rid] = f"replica {self.name} failed at {now_s:.1f} s mid-answer"
            self._num_waiting_tokens -= self._waiting_tokens.pop(rid, 0)
        self._stuck = False
        return lost

    @property
    def is_idle(self) -> bool:
        return not self.core.has_unfinished()

    @property
    def is_busy(self) -> bool:
        """Holds requests it can still make progress on."""
        return not self.is_idle and not self._stuck

    # time
    def advance(self, until_s: float) -> list[str]:
        """Run every step that starts before ``until_s``; returns the requests finished."""
        core = self.core
        finished: list[str] = []
        while self.clock_s < until_s and core.has_unfinished():
            queued = bool(core.scheduler.waiting)
            run = core.decode_run(1 << 30, until_s - self.clock_s, with_split=False)
            if run is not None:
                j = len(self.step_end_s)
                for d in run.durations_s:
                    self.clock_s += d
                    self.step_end_s.append(self.clock_s)
                k = len(run.durations_s)
                for rid in run.request_ids:
                    self._extend(rid, j, j + k)
                finished += run.finished
                duration = sum(run.durations_s)
                self._measure(k * len(run.request_ids), 0, duration, False)
                if queued:
                    self._count_queued(duration, 0)  # the queue waited through the run
                continue
            result = core.step(with_split=False)
            if result is None:
                self._stuck = True  # nothing schedulable: the stragglers end as timeouts
                break
            j = len(self.step_end_s)
            start = self.clock_s
            self.clock_s += result.duration_s
            self.step_end_s.append(self.clock_s)
            for rid, _ in result.tokens:
                if not self._runs[rid]:
                    # its first token: the prompt is no longer queued work
                    self._num_waiting_tokens -= self._waiting_tokens.pop(rid, 0)
                self._extend(rid, j, j + 1)
            for rid in result.started:
                self._started[rid] = start
            finished += result.finished
            if queued:
                self._count_queued(result.duration_s, len(result.started))
            self._measure(
                result.num_scheduled_tokens,
                result.num_prefill_tokens,
                result.duration_s,
                bool(core.scheduler.waiting),
            )
        if not core.has_unfinished() and until_s != math.inf:
            self.clock_s = max(self.clock_s, until_s)  # idle until then
        return finished

    def _count_queued(self, duration_s: float, starts: int) -> None:
        # starts over time spent with a queue, both decayed over about _START_TAU_S of it:
        # the rate a queue drains at, never an idle replica's trickle of arrivals
        decay = math.exp(-duration_s / _START_TAU_S)
        self._queued_starts = self._queued_starts * decay + starts
        self._queued_s = self._queued_s * decay + duration_s

    @property
    def start_rate_rps(self) -> float:
        """Requests per second taken from the queue while one waited (0 until measured)."""
        if self._queued_s < _MIN_QUEUED_S:
            return 0.0
        return self._queued_starts / self._queued_s

    def _extend(self, rid: str, j: int, end: int) -> None:
        runs = self._runs[rid]
        if runs and runs[-1] == j:
            runs[-1] = end
        else:
            runs += (j, end)

    def _measure(self, tokens: int, prefill_tokens: int, duration_s: float, queued: bool) -> None:
        if duration_s <= 0:
            return
        self.busy_s += duration_s
        self.throughput_tps += _EWMA * (tokens / duration_s - self.throughput_tps)
        if queued and prefill_tokens:
            # a step with requests left waiting ran at the replica's full prefill rate
            self.prefill_tps += _EWMA * (prefill_tokens / duration_s - self.prefill_tps)

    # results
    def records(self, requests: Mapping[str, SimRequest]) -> list[RequestRecord]:
        """A record for every request routed here (unfinished ones as timeouts)."""
        ends = np.asarray(self.step_end_s, dtype=float)
        out: list[RequestRecord] = []
        for rid, runs in self._runs.items():
            r = requests[rid]
            times: list[float] = np.concatenate(
                [ends[runs[k] : runs[k + 1]] for k in range(0, len(runs), 2)] or [ends[:0]]
            ).tolist()
            if rid in self._cut:
                out.append(
                    RequestRecord(
                        request_id=rid,
                        send_s=r.arrival_s,
                        first_token_s=times[0] if times else None,
                        end_s=None,
                        input_tokens=r.prompt_tokens,
                        error="http_5xx",
                        error_detail=self._cut[rid],
                        http_status=502,
                        scheduled_s=r.arrival_s,
                    )
                )
                continue
            if len(times) < r.max_tokens:
                out.append(
                    RequestRecord(
                        request_id=rid,
                        send_s=r.arrival_s,
                        first_token_s=None,
                        end_s=None,
                        input_tokens=r.prompt_tokens,
                        error="timeout",
                        error_detail=f"replica {self.name} could not schedule this request "
                        f"(produced {len(times)} of {r.max_tokens} tokens)",
                        scheduled_s=r.arrival_s,
                    )
                )
                continue
            out.append(
                RequestRecord(
                    request_id=rid,
                    send_s=r.arrival_s,
                    first_token_s=times[0],
                    end_s=times[-1],
                    chunk_times_s=tuple(times),
                    chunk_tokens=(1,) * len(times),
                    input_tokens=r.prompt_tokens,
                    output_tokens=len(times),
                    scheduled_s=r.arrival_s,
                )
            )
        return out

    def queued_s(self, requests: Mapping[str, SimRequest]) -> list[float]:
        """Arrival -> first scheduled step of each request that started."""
        return [t - requests[rid].arrival_s for rid, t in self._started.items()]
