"""The contract of a routing policy, run on every registered one (and on slo-aware around
each of them): one suite over the registry's ``POLICY_NAMES``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotune.tuner.fleet import (
    POLICY_NAMES,
    PolicyContext,
    ReplicaState,
    RequestInfo,
    policy_from_name,
)
from slotune.tuner.fleet.registry import SLO_AWARE

# What every policy may ask of the fleet: a long pool, a length threshold, a TTFT budget.
CONTEXT = PolicyContext(
    long_pools=frozenset({"long"}),
    length_threshold_tokens=1000.0,
    ttft_budget_s=0.5,
    pool_names=frozenset({"long", "short"}),
)
SPECS = [*POLICY_NAMES, *(f"{SLO_AWARE}:{n}" for n in POLICY_NAMES if n != SLO_AWARE)]
BOUNDED = settings(max_examples=30, deadline=None)

replica_states = st.lists(
    st.builds(
        ReplicaState,
        name=st.sampled_from([f"r{i}" for i in range(6)]),
        pool=st.sampled_from(["long", "short"]),
        model=st.just("m"),
        num_running=st.integers(0, 64),
        num_waiting=st.integers(0, 16),
        kv_usage=st.floats(0.0, 1.0),
        throughput_tps=st.floats(0.0, 5000.0),
        num_waiting_tokens=st.integers(0, 50_000),
        prefill_tps=st.floats(0.0, 50_000.0),
        kv_capacity_tokens=st.integers(0, 100_000),
    ),
    max_size=6,
    unique_by=lambda r: r.name,
)
requests = st.builds(
    RequestInfo,
    request_id=st.text(min_size=1, max_size=4),
    model=st.just("m"),
    input_tokens=st.integers(1, 8000),
    expected_output_tokens=st.floats(1.0, 2000.0),
    prefix_hashes=st.lists(st.integers(0, 5), max_size=4).map(tuple),
    session_id=st.none() | st.sampled_from(["a", "b"]),
)
steps = st.lists(st.tuples(requests, replica_states, st.integers(1, 500)), min_size=1, max_size=8)


@pytest.mark.parametrize("spec", SPECS)
def test_each_build_is_a_fresh_policy_named_after_its_spec(spec: str) -> None:
    first, second = policy_from_name(spec, CONTEXT), policy_from_name(spec, CONTEXT)
    assert first is not second
    assert first.name == spec or first.name == f"{spec}:least-requests"


@pytest.mark.parametrize("spec", SPECS)
def test_no_replica_sheds_with_a_reason(spec: str) -> None:
    request = RequestInfo("1", "m", 100, 50.0)
    decision = policy_from_name(spec, CONTEXT).choose(request, [])
    assert decision.shed and decision.shed_reason


@pytest.mark.parametrize("spec", SPECS)
@BOUNDED
@given(steps=steps)
def test_a_policy_picks_a_given_replica_or_sheds_with_a_reason_and_repeats_itself(
    spec: str, steps: list[tuple[RequestInfo, list[ReplicaState], int]]
) -> None:
    # two fresh policies fed the same requests decide alike (no hidden global state)
    runs = []
    for _ in range(2):
        policy = policy_from_name(spec, CONTEXT)
        decisions = []
        for request, replicas, output_tokens in steps:
            decision = policy.choose(request, replicas)
            if decision.shed:
                assert decision.shed_reason and decision.retry_after_s >= 0.0
            else:
                assert decision.replica in {r.name for r in replicas}
                policy.on_finish(request, decision.replica, output_tokens)
            decisions.append(decision)
        runs.append(decisions)
    assert runs[0] == runs[1]
