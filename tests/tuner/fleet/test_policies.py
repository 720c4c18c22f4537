"""Routing policies: property tests of their promises, and the registry's errors."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotune.collector.errors import ConfigError
from slotune.tuner.fleet import (
    POLICY_NAMES,
    OutputLengthEstimator,
    PolicyContext,
    ReplicaState,
    RequestInfo,
    policy_from_name,
)
from slotune.tuner.fleet.length_pools import LengthPools, length_threshold
from slotune.tuner.fleet.prefix_affinity import PrefixAffinity
from slotune.tuner.fleet.score import Score
from slotune.tuner.fleet.slo_aware import SloAware

BOUNDED = settings(max_examples=60, deadline=None)


def _request(i: int = 0, **kw: object) -> RequestInfo:
    fields: dict[str, object] = {
        "request_id": str(i),
        "model": "m",
        "input_tokens": 100,
        "expected_output_tokens": 50.0,
    }
    fields.update(kw)
    return RequestInfo(**fields)  # type: ignore[arg-type]


def _replicas(loads: list[int], pools: list[str] | None = None) -> list[ReplicaState]:
    pools = pools or ["p"] * len(loads)
    return [
        ReplicaState(name=f"r{i}", pool=pool, model="m", num_running=load)
        for i, (load, pool) in enumerate(zip(loads, pools, strict=True))
    ]


@BOUNDED
@given(
    session=st.text(min_size=1, max_size=8),
    loads=st.lists(st.integers(0, 20), min_size=1, max_size=8),
)
def test_prefix_affinity_without_a_cached_prefix_is_least_requests_preferring_home(
    session: str, loads: list[int]
) -> None:
    policy = PrefixAffinity(load_factor=1.25)
    request = _request(session_id=session)
    replicas = _replicas(loads)
    home = policy.home(b"s" + session.encode(), replicas).name
    chosen = policy.choose(request, replicas).replica
    loads_by_name = {r.name: r.load for r in replicas}
    assert loads_by_name[chosen or ""] == min(loads)
    if loads_by_name[home] == min(loads):
        assert chosen == home


def _prompt(i: int, first_block: int, num_blocks: int) -> RequestInfo:
    return _request(
        i,
        input_tokens=512 * num_blocks,
        expected_output_tokens=0.0,
        prefix_hashes=tuple(range(first_block, first_block + num_blocks)),
    )


def _cached(names: list[str], loads: list[int], kv_blocks: int = 0) -> list[ReplicaState]:
    return [
        ReplicaState(
            name=n, pool="p", model="m", num_running=load, kv_capacity_tokens=512 * kv_blocks
        )
        for n, load in zip(names, loads, strict=True)
    ]


def test_prefix_affinity_follows_a_cached_prefix_while_the_hit_outweighs_the_queue() -> None:
    policy = PrefixAffinity(hit_weight=2.0)
    # the first turn: 8 blocks on r0 (the only replica up)
    assert policy.choose(_prompt(0, 0, 8), _cached(["r0"], [0])).replica == "r0"
    # the next turn holds the same 8 blocks: a whole mean prompt's hit, worth 2 requests
    assert policy.choose(_prompt(1, 0, 8), _cached(["r0", "r1"], [1, 0])).replica == "r0"
    # 3 requests ahead outweigh it: least-requests' choice
    assert policy.choose(_prompt(2, 0, 8), _cached(["r0", "r1"], [3, 0])).replica == "r1"


def test_prefix_affinity_forgets_a_prefix_the_replicas_kv_cache_has_evicted() -> None:
    for kv_blocks, still_cached in ((20, True), (12, False)):
        policy = PrefixAffinity(hit_weight=2.0)
        replica = _cached(["r0"], [0], kv_blocks)
        policy.choose(_prompt(0, 0, 8), replica)
        # 8 other blocks later: a 20-block cache still holds the first 8, a 12-block one not
        policy.choose(_prompt(1, 100, 8), replica)
        hit = policy.expected_hit_tokens(_prompt(2, 0, 8), replica[0])
        assert hit == (512 * 8 if still_cached else 0)
        # evicted, the next turn goes where least-requests sends it
        two = _cached(["r0", "r1"], [1, 0], kv_blocks)
        assert policy.choose(_prompt(2, 0, 8), two).replica == ("r0" if still_cached else "r1")


def test_prefix_affinity_gives_no_credit_where_the_kv_cache_cannot_take_the_request() -> None:
    policy = PrefixAffinity()
    idle = _cached(["r0"], [0], kv_blocks=100)
    policy.choose(_prompt(0, 0, 8), idle)
    full = replace(idle[0], kv_usage=0.99)
    assert policy.expected_hit_tokens(_prompt(1, 0, 10), idle[0]) == 512 * 8
    assert policy.expected_hit_tokens(_prompt(1, 0, 10), full) == 0


def test_prefix_affinity_moves_only_the_removed_replicas_keys() -> None:
    policy = PrefixAffinity()
    four = _replicas([0, 0, 0, 0])
    before = {s: policy.choose(_request(session_id=str(s)), four).replica for s in range(200)}
    three = [r for r in four if r.name != "r3"]
    after = {s: policy.choose(_request(session_id=str(s)), three).replica for s in range(200)}
    assert all(after[s] == before[s] for s in before if before[s] != "r3")
    assert len({v for v in before.values()}) == 4


@BOUNDED
@given(
    threshold=st.integers(10, 5000),
    lengths=st.lists(
        st.tuples(st.integers(1, 4000), st.integers(1, 4000)), min_size=1, max_size=40
    ),
    pools=st.lists(st.sampled_from(["short", "long"]), min_size=1, max_size=6),
    loads=st.data(),
)
def test_length_pools_never_sends_a_long_request_to_the_short_pool(
    threshold: int, lengths: list[tuple[int, int]], pools: list[str], loads: st.DataObject
) -> None:
    policy = LengthPools(threshold, frozenset({"long"}))
    replica_loads = loads.draw(
        st.lists(st.integers(0, 9), min_size=len(pools), max_size=len(pools))
    )
    replicas = _replicas(replica_loads, pools)
    pool_of = {r.name: r.pool for r in replicas}
    for i, (n_in, n_out) in enumerate(lengths):
        decision = policy.choose(
            _request(i, input_tokens=n_in, expected_output_tokens=float(n_out)), replicas
        )
        if n_in + n_out > threshold:
            assert decision.shed or pool_of[decision.replica or ""] == "long"
            assert decision.shed == ("long" not in pools)
        else:
            assert not decision.shed
            assert pool_of[decision.replica or ""] == ("short" if "short" in pools else "long")


def test_length_threshold_splits_the_work_by_capacity() -> None:
    totals = [100] * 90 + [1000] * 10  # 9000 + 10000 tokens
    assert length_threshold(totals, 0.5) == 100.0
    with pytest.raises(ConfigError, match="share"):
        length_threshold(totals, 1.0)


@BOUNDED
@given(
    weights=st.tuples(st.floats(0, 5), st.floats(0, 5), st.floats(0, 5)).filter(
        lambda w: max(w) > 0
    ),
    waiting=st.lists(st.integers(0, 30), min_size=2, max_size=6),
    kv=st.data(),
)
def test_score_picks_the_highest_weighted_sum(
    weights: tuple[float, float, float], waiting: list[int], kv: st.DataObject
) -> None:
    usages = kv.draw(st.lists(st.floats(0, 1), min_size=len(waiting), max_size=len(waiting)))
    replicas = [
        ReplicaState(name=f"r{i}", pool="p", model="m", num_waiting=w, kv_usage=u)
        for i, (w, u) in enumerate(zip(waiting, usages, strict=True))
    ]
    policy = Score(*weights)
    # r0 holds the request's whole prefix, nobody else holds any of it
    policy.index.record("r0", (1, 2, 3, 4))
    request = _request(prefix_hashes=(1, 2, 3, 4))
    lo, hi = min(waiting), max(waiting)
    expected = [
        weights[0] * (1.0 if i == 0 else 0.0)
        + weights[1] * ((hi - w) / (hi - lo) if hi > lo else 1.0)
        + weights[2] * (1 - u)
        for i, (w, u) in enumerate(zip(waiting, usages, strict=True))
    ]
    assert policy.scores(request, replicas) == pytest.approx(expected)
    chosen = policy.choose(request, replicas).replica
    assert expected[int((chosen or "r")[1:])] == pytest.approx(max(expected))


def test_score_prefix_weight_dominates_an_idle_fleet() -> None:
    policy = Score()
    replicas = _replicas([0, 0, 0])
    first = policy.choose(_request(0, prefix_hashes=(7, 8)), replicas).replica
    again = {policy.choose(_request(i, prefix_hashes=(7, 8)), replicas).replica for i in range(5)}
    assert again == {first}


def test_slo_aware_sheds_only_when_every_replica_of_the_pool_would_miss_the_budget() -> None:
    policy = SloAware(policy_from_name("round-robin"), ttft_budget_s=0.5)
    slow = ReplicaState(
        "a", "p", "m", num_waiting=10, num_waiting_tokens=20_000, prefill_tps=10_000
    )
    fast = ReplicaState("b", "p", "m", num_waiting=1, num_waiting_tokens=1_000, prefill_tps=10_000)
    request = _request(input_tokens=1000)
    assert policy.choose(request, [slow, fast]).replica == "b"
    assert policy.choose(request, [slow, fast]).replica == "b"
    decision = policy.choose(request, [slow])
    assert decision.shed
    # 20k tokens queued ahead at 10k tokens/s: 2 s of queueing, 1.5 s over the budget
    assert decision.retry_after_s == pytest.approx(2.0 - 0.5)


def test_estimator_uses_max_tokens_then_client_then_model_quantiles() -> None:
    est = OutputLengthEstimator(quantile=0.5, prior_tokens=99)
    assert est.expected("m", "c", None) == 99
    assert est.expected("m", "c", 17) == 17
    for _ in range(30):
        est.observe("m", "c", 1000)
        est.observe("m", None, 10)
    assert est.expected("m", "c", None) == pytest.approx(1000, rel=0.02)
    assert est.expected("m", "other", None) == pytest.approx(10, rel=0.3)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bogus", "unknown policy 'bogus'"),
        ("score:prefix=x", "prefix='x' is not a number"),
        ("score:heat=1", "unknown key heat"),
        ("length-pools", "needs a long pool"),
        ("slo-aware", "needs a TTFT budget"),
        ("prefix-affinity:load=1", "above 1"),
        ("prefix-affinity:hit=0", "hit=0.0: use a positive number"),
        ("prefix-affinity:hit=nan", "hit=nan: use a positive number"),
    ],
)
def test_registry_errors_name_the_field(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        policy_from_name(spec)


def test_registry_builds_every_policy() -> None:
    ctx = PolicyContext(
        long_pools=frozenset({"long"}), length_threshold_tokens=2000, ttft_budget_s=0.5
    )
    replicas = _replicas([1, 0], ["short", "long"])
    for name in POLICY_NAMES:
        policy = policy_from_name(name, ctx)
        assert policy.choose(_request(), replicas).replica in {"r0", "r1"}
    assert policy_from_name("slo-aware:score:margin=2:kv=0", ctx).name == "slo-aware:score"
