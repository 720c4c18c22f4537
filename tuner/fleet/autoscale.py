"""``slotune plan autoscale``: replay a trace against scaling policies on the fleet simulator.

Every ``interval_s`` the autoscaler reads the ready replicas of each scaling group and asks
for ``ceil(replicas x metric / target)`` replicas (the Kubernetes HPA rule, with its 10 %
tolerance, starting replicas counted as idle, and its default scale-up limit of 4 replicas
or 100 % per tick); a schedule names
the count by time of day instead. Growth is immediate but a new replica serves only after
``cold_start_s`` (model load) and counts as capacity while it starts, so the autoscaler does
not overshoot; shrinking takes the highest desired count of the last ``cooldown_s`` (HPA's
scale-down stabilisation) and drains replicas, which stop once their last request is done.

Which pool grows: the one with the cheapest capacity per SLO-met request (GPU price / one
replica's capacity under the SLOs); which shrinks: the most expensive (llm-d's variant
autoscaler does the same). Pools are one scaling group when the router spreads requests
over all of them, and a group each under ``length-pools``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from slotune.collector.durations import parse_duration_s
from slotune.collector.errors import ConfigError, SLOSpecError
from slotune.collector.plans import ScaleEvent
from slotune.tuner.fleet.fleet import Fleet
from slotune.tuner.fleet.policy import ReplicaState
from slotune.tuner.fleet.replica import Replica
from slotune.tuner.fleet.slo_aware import predicted_queueing_s

DEFAULT_COLD_START_S = 120.0
DEFAULT_COOLDOWN_S = 300.0
DEFAULT_INTERVAL_S = 15.0
_TOLERANCE = 0.1


class ScalingMetric(StrEnum):
    WAITING = "waiting"  # waiting requests per replica
    KV = "kv"  # mean KV-cache usage
    TTFT = "ttft"  # mean predicted queueing delay before the first token, seconds
    SCHEDULE = "schedule"  # replicas by time of day


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """A scaling rule: ``waiting:4``, ``kv:0.7``, ``ttft:300ms``, ``schedule:0=2,1800=6``.

    A schedule maps seconds from the start of each day to the group's replica count.
    """

    metric: ScalingMetric
    target: float
    schedule: tuple[tuple[float, int], ...] = ()
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> ScalingPolicy:
        """Raises: ConfigError naming the spec and the accepted forms."""
        kind, _, value = text.partition(":")
        forms = "waiting:N, kv:F, ttft:300ms or schedule:SECONDS=REPLICAS,…"
        try:
            metric = ScalingMetric(kind)
        except ValueError:
            raise ConfigError(f"--scaling {text!r}: unknown metric; use {forms}") from None
        try:
            if metric is ScalingMetric.SCHEDULE:
                steps = sorted(
                    (float(at), int(n)) for at, n in (s.split("=") for s in value.split(","))
                )
                if not steps or min(n for _, n in steps) < 0:
                    raise ValueError
                return cls(metric, 0.0, tuple(steps), text)
            target = (
                parse_duration_s(value, field_name=f"--scaling {text}")
                if metric is ScalingMetric.TTFT
                else float(value)
            )
        except (ValueError, SLOSpecError):
            raise ConfigError(f"--scaling {text!r}: bad value; use {forms}") from None
        if target <= 0 or (metric is ScalingMetric.KV and target > 1):
            raise ConfigError(f"--scaling {text!r}: the target must be > 0 (kv: at most 1)")
        return cls(metric, target, (), text)

    def desired(
        self, now_s: float, day_s: float, ready: Sequence[ReplicaState], num_active: int
    ) -> int | None:
        """Replicas the group should have; None to keep what it has.

        As in the HPA, replicas still starting count as using nothing: the metric is
        averaged over all ``num_active`` replicas, so a queue is not counted again on
        every tick while the replicas ordered for it load their model.
        """
        if self.metric is ScalingMetric.SCHEDULE:
            at = now_s % day_s if day_s > 0 else now_s
            count = self.schedule[0][1]
            for start, n in self.schedule:
                if start <= at:
                    count = n
            return count
        if not ready:
            return None
        n = max(num_active, len(ready))
        if self.metric is ScalingMetric.WAITING:
            value = sum(r.num_waiting for r in ready) / n
        elif self.metric is ScalingMetric.KV:
            value = sum(r.kv_usage for r in ready) / n
        else:
            value = sum(predicted_queueing_s(r, 0) for r in ready) / n
        ratio = value / self.target
        if abs(ratio - 1) <= _TOLERANCE:
            return None
        return math.ceil(n * ratio)


@dataclass(frozen=True, slots=True)
class ScalingSettings:
    """Args of the autoscaler: replica start-up delay, scale-down cool-down, tick, bounds."""

    cold_start_s: float = DEFAULT_COLD_START_S
    cooldown_s: float = DEFAULT_COOLDOWN_S
    interval_s: float = DEFAULT_INTERVAL_S
    min_replicas: int = 1
    max_replicas: int = 64

    def __post_init__(self) -> None:
        if self.cold_start_s < 0 or self.cooldown_s < 0 or self.interval_s <= 0:
            raise ConfigError("--cold-start and --cooldown must be >= 0 and --interval > 0 seconds")
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ConfigError("--min-replicas must be >= 1 and at most --max-replicas")


class Autoscaler:
    """The fleet simulator's controller for one scaling policy.

    Args:
        policy: the scaling rule.
        settings: delays and bounds (per group).
        groups: pools scaled together, each listed cheapest capacity per request first.
        day_s: length of one day of the replayed trace (for schedules).
    """

    def __init__(
        self,
        policy: ScalingPolicy,
        settings: ScalingSettings,
        groups: Sequence[Sequence[str]],
        day_s: float,
    ) -> None:
        self.policy = policy
        self.settings = settings
        self.tick_s = settings.interval_s
        self.groups = [list(g) for g in groups]
        self.day_s = day_s
        self.events: list[ScaleEvent] = []
        window = max(1, math.ceil(settings.cooldown_s / settings.interval_s))
        self._recent: list[deque[int]] = [deque(maxlen=window) for _ in self.groups]

    def on_tick(self, now_s: float, fleet: Fleet) -> None:
        fleet.retire_idle(now_s)
        for group, recent in zip(self.groups, self._recent, strict=True):
            active = [r for r in fleet.replicas if r.pool in group and not r.draining]
            ready = [r.state() for r in active if r.ready_s <= now_s]
            want = self.policy.desired(now_s, self.day_s, ready, len(active))
            want = len(active) if want is None else want
            s = self.settings
            # HPA's default scale-up limit: 4 replicas or 100 % per tick, whichever is more
            want = min(want, len(active) + max(4, len(active)))
            want = min(max(want, s.min_replicas), s.max_replicas)
            recent.append(want)
            if want > len(active):
                for _ in range(want - len(active)):
                    fleet.add_replica(group[0], now_s + s.cold_start_s, now_s)
                    self.events.append(ScaleEvent(now_s, group[0], +1, len(active) + 1))
                    active.append(fleet.replicas[-1])
                continue
            # shrink only to the highest count asked for during the cool-down
            floor = max(recent)
            for _ in range(len(active) - floor):
                victim = _most_expensive(active, group)
                victim.draining = True
                active.remove(victim)
                self.events.append(ScaleEvent(now_s, victim.pool, -1, len(active)))


def _most_expensive(active: list[Replica], group: list[str]) -> Replica:
    # the last pool of the group costs most per request; within it, the least busy replica
    rank = {pool: i for i, pool in enumerate(group)}
    return max(active, key=lambda r: (rank[r.pool], -r.core.stats.num_running, r.name))
