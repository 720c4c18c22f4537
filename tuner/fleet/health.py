"""Replica outages on the fleet simulator, and ``slotune route``'s circuit breakers facing them.

An outage (``--outage NAME:AT_S:DURATION_S[:hang]``) makes one replica fail at ``AT_S`` for
``DURATION_S``: the streams it holds are cut (5xx), and until it recovers it either refuses
connections (``down``, the default: the engine process is gone) or accepts requests and
never answers them (``hang``: a stuck GPU). The router sees it as the proxy does:

- a refused connection counts against the replica's circuit and the request goes to another
  replica, once per replica (502 when none is left);
- a hung request ends with 504 after ``timeouts.first_byte`` and counts then; it is not
  retried;
- the replica's ``/metrics`` reads fail every ``poll_interval`` while it is out, and count too,
  so a replica without traffic is ejected all the same;
- a successful request closes the circuit; a good read of ``/metrics`` does not.

The breaker is the proxy's own :class:`CircuitBreaker` with a ``fleet.yaml``'s
``circuit_breaker``, ``poll_interval`` and ``timeouts.first_byte`` (their defaults without
one), on the simulator's clock. A replica recovers empty: its queue was lost with the crash.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import cast

from slotune.collector.errors import ConfigError
from slotune.tuner.fleet.route_breaker import BreakerState, CircuitBreaker
from slotune.tuner.fleet.route_config import BreakerSettings, RouteConfig, TimeoutSettings

# route's default (a RouteConfig needs backends, so its field's default is read instead)
_ROUTE_POLL_INTERVAL_S = cast(float, RouteConfig.__dataclass_fields__["poll_interval_s"].default)


class OutageKind(StrEnum):
    DOWN = "down"  # refuses connections
    HANG = "hang"  # accepts requests and never answers


@dataclass(frozen=True, slots=True)
class Outage:
    """One replica out of service from ``at_s`` for ``duration_s``."""

    replica: str
    at_s: float
    duration_s: float
    kind: OutageKind = OutageKind.DOWN

    @classmethod
    def parse(cls, text: str) -> Outage:
        """``NAME:AT_S:DURATION_S[:down|hang]``.

        Raises:
            ConfigError: naming the spec and the form.
        """
        parts = text.split(":")
        form = "NAME:AT_S:DURATION_S[:down|hang], e.g. a-0:600:120"
        try:
            name, at, duration = parts[0], float(parts[1]), float(parts[2])
            kind = OutageKind(parts[3]) if len(parts) == 4 else OutageKind.DOWN
            if len(parts) > 4 or not name or at < 0 or duration <= 0:
                raise ValueError
        except (ValueError, IndexError):
            raise ConfigError(f"--outage {text!r}: use {form}") from None
        return cls(name, at, duration, kind)

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s


@dataclass(frozen=True, slots=True)
class HealthSettings:
    """The proxy's settings that decide how the router sees a failing replica.

    ``breaker`` None: no circuit breaker (every live replica stays a candidate).
    """

    breaker: BreakerSettings | None = field(default_factory=BreakerSettings)
    poll_interval_s: float = _ROUTE_POLL_INTERVAL_S
    first_byte_s: float = TimeoutSettings().first_byte_s

    @classmethod
    def from_route_config(cls, config: RouteConfig) -> HealthSettings:
        """The breaker, poll interval and first-byte timeout of a ``fleet.yaml``."""
        return cls(config.breaker, config.poll_interval_s, config.timeouts.first_byte_s)

    def to_dict(self) -> dict[str, float | None]:
        b = self.breaker
        return {
            "failures": None if b is None else b.failures,
            "open_for_s": None if b is None else b.open_for_s,
            "poll_interval_s": self.poll_interval_s,
            "first_byte_s": self.first_byte_s,
        }


class FleetHealth:
    """Which replicas are out, and each replica's circuit, on the fleet's clock.

    Args:
        outages: the replicas' outages (names as the fleet gives them: ``POOL-i``).
        settings: breaker, ``/metrics`` poll interval and first-byte timeout.
    """

    def __init__(self, outages: Sequence[Outage], settings: HealthSettings) -> None:
        self.outages = sorted(outages, key=lambda o: o.at_s)
        self.settings = settings
        self._breakers: dict[str, CircuitBreaker] = {}
        self._polled_s: dict[str, float] = {}
        self._pending: list[tuple[float, str]] = []  # (when, replica): hung requests' 504s
        self._hung: Counter[str] = Counter()
        self.num_refused = 0  # connection attempts refused by a replica that is down
        self.num_ejections = 0  # circuits that opened

    def check_names(self, names: Sequence[str]) -> None:
        """Raises: ConfigError for an outage naming no replica of the fleet."""
        for o in self.outages:
            if o.replica not in names:
                known = ", ".join(names)
                raise ConfigError(
                    f"--outage {o.replica}: no such replica at the start; use one of {known}"
                )

    def outage(self, replica: str, now_s: float) -> Outage | None:
        """The outage ``replica`` is in at ``now_s``, if any."""
        for o in self.outages:
            if o.replica == replica and o.at_s <= now_s < o.end_s:
                return o
        return None

    def starting(self, after_s: float, until_s: float) -> list[Outage]:
        """Outages that begin in ``(after_s, until_s]``."""
        return [o for o in self.outages if after_s < o.at_s <= until_s]

    # the circuits
    def can_send(self, replica: str, now_s: float) -> bool:
        self._sync(replica, now_s)
        breaker = self._breakers.get(replica)
        return breaker is None or breaker.can_send(now_s)

    def on_send(self, replica: str, now_s: float) -> None:
        breaker = self._breaker(replica)
        if breaker is not None:
            breaker.on_send(now_s)

    def on_success(self, replica: str) -> None:
        breaker = self._breakers.get(replica)
        if breaker is not None:
            breaker.on_success()

    def on_failure(self, replica: str, now_s: float) -> None:
        breaker = self._breaker(replica)
        if breaker is None:
            return
        before = breaker.state(now_s)
        breaker.on_failure(now_s)
        if before is not BreakerState.OPEN and breaker.state(now_s) is BreakerState.OPEN:
            self.num_ejections += 1

    def on_refused(self, replica: str, now_s: float) -> None:
        self.num_refused += 1
        self.on_failure(replica, now_s)

    def on_hung(self, replica: str, now_s: float) -> float:
        """A request went to a hung replica: it fails (504) at the returned time."""
        when = now_s + self.settings.first_byte_s
        heapq.heappush(self._pending, (when, replica))
        self._hung[replica] += 1
        return when

    def num_hung(self, replica: str) -> int:
        """Requests sent to ``replica`` that hang and have not timed out yet."""
        return self._hung[replica]

    def _breaker(self, replica: str) -> CircuitBreaker | None:
        b = self.settings.breaker
        if b is None:
            return None
        if replica not in self._breakers:
            self._breakers[replica] = CircuitBreaker(b.failures, b.open_for_s)
        return self._breakers[replica]

    def _sync(self, replica: str, now_s: float) -> None:
        """Count, in time order, the failures the proxy would have seen by ``now_s``: hung
        requests' timeouts and failed ``/metrics`` reads of the replicas that are out."""
        while self._pending and self._pending[0][0] <= now_s:
            when, name = heapq.heappop(self._pending)
            self._hung[name] -= 1
            self._poll(name, when)
            self.on_failure(name, when)
        self._poll(replica, now_s)

    def _poll(self, replica: str, now_s: float) -> None:
        """The reads of ``replica``'s ``/metrics`` up to ``now_s`` that failed."""
        if self.settings.breaker is None:
            return
        step = self.settings.poll_interval_s
        last = self._polled_s.get(replica, 0.0)
        for o in self.outages:
            if o.replica != replica or o.end_s <= last or o.at_s > now_s:
                continue
            # reads fall on the poll grid; those inside the outage fail
            first = max(last, o.at_s)
            k = math.floor(first / step) + 1
            while k * step <= min(now_s, o.end_s):
                self.on_failure(replica, k * step)
                k += 1
        self._polled_s[replica] = max(last, now_s)
