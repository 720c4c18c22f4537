"""The circuit breaker's states, driven by an explicit clock."""

from __future__ import annotations

from slotune.tuner.fleet.route_breaker import BreakerState, CircuitBreaker


def test_consecutive_failures_open_it_and_a_success_resets_the_count() -> None:
    b = CircuitBreaker(failures=3, open_for_s=10.0)
    b.on_failure(0.0)
    b.on_failure(0.0)
    b.on_success()
    b.on_failure(1.0)
    b.on_failure(1.0)
    assert b.state(1.0) is BreakerState.CLOSED
    b.on_failure(2.0)
    assert b.state(2.0) is BreakerState.OPEN
    assert not b.can_send(11.9)


def test_half_open_lets_one_probe_through() -> None:
    b = CircuitBreaker(failures=1, open_for_s=10.0)
    b.on_failure(0.0)
    assert b.state(10.0) is BreakerState.HALF_OPEN
    assert b.can_send(10.0)
    b.on_send(10.0)
    assert not b.can_send(10.5)  # the probe is out: nothing else goes
    b.on_success()
    assert b.state(10.5) is BreakerState.CLOSED
    assert b.can_send(10.5)


def test_a_failed_probe_opens_it_again_for_the_full_time() -> None:
    b = CircuitBreaker(failures=3, open_for_s=10.0)
    for _ in range(3):
        b.on_failure(0.0)
    b.on_send(10.0)
    b.on_failure(12.0)  # one failure in half-open is enough
    assert b.state(21.9) is BreakerState.OPEN
    assert b.state(22.0) is BreakerState.HALF_OPEN


def test_an_abandoned_probe_frees_the_slot() -> None:
    b = CircuitBreaker(failures=1, open_for_s=1.0)
    b.on_failure(0.0)
    b.on_send(1.0)
    assert not b.can_send(1.0)
    b.on_abandoned()
    assert b.can_send(1.0)


def test_seconds_until_probe() -> None:
    b = CircuitBreaker(failures=1, open_for_s=10.0)
    assert b.seconds_until_probe(0.0) == 0.0
    b.on_failure(2.0)
    assert b.seconds_until_probe(5.0) == 7.0
    b.on_send(12.0)  # the probe is out
    assert b.seconds_until_probe(12.5) == 10.0
