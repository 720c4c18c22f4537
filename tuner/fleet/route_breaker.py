"""A per-backend circuit breaker: consecutive failures open it, a single probe closes it again.

closed --(``failures`` in a row)--> open --(``open_for_s`` elapsed)--> half-open
half-open --(the one probe request succeeds)--> closed; --(it fails)--> open again.

Failures are upstream errors the proxy saw (refused connections, timeouts, 5xx, a stream cut
short) and failed reads of the backend's ``/metrics``; a 4xx is the client's fault, not the
backend's, and counts as a success. Time is passed in, so the state machine is testable alone.
"""

from __future__ import annotations

from enum import StrEnum


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """The state of one backend's circuit.

    Args:
        failures: consecutive failures that open the circuit.
        open_for_s: how long it stays open before one probe request is let through.
    """

    def __init__(self, failures: int, open_for_s: float) -> None:
        self.failures = failures
        self.open_for_s = open_for_s
        self._state = BreakerState.CLOSED
        self._consecutive = 0
        self._opened_at = 0.0
        self._probing = False

    def state(self, now: float) -> BreakerState:
        """The state at ``now`` (an open circuit turns half-open once its time is up)."""
        if self._state is BreakerState.OPEN and now - self._opened_at >= self.open_for_s:
            self._state = BreakerState.HALF_OPEN
            self._probing = False
        return self._state

    def can_send(self, now: float) -> bool:
        """Whether a request may go to the backend now (half-open: only while no probe runs)."""
        state = self.state(now)
        return state is BreakerState.CLOSED or (
            state is BreakerState.HALF_OPEN and not self._probing
        )

    def seconds_until_probe(self, now: float) -> float:
        """How long until the circuit lets a request through (0 when it does now)."""
        if self.can_send(now):
            return 0.0
        if self._state is BreakerState.OPEN:
            return self._opened_at + self.open_for_s - now
        return self.open_for_s  # half-open with its probe out: at worst it fails and reopens

    def on_send(self, now: float) -> None:
        """A request was sent: in half-open it is the probe."""
        if self.state(now) is BreakerState.HALF_OPEN:
            self._probing = True

    def on_abandoned(self) -> None:
        """A request ended without telling (the client left): a probe may be sent again."""
        self._probing = False

    def on_success(self) -> None:
        self._state = BreakerState.CLOSED
        self._consecutive = 0
        self._probing = False

    def on_failure(self, now: float) -> None:
        self._consecutive += 1
        if self._state is BreakerState.HALF_OPEN or self._consecutive >= self.failures:
            self._state = BreakerState.OPEN
            self._opened_at = now
            self._probing = False
