"""The fleet simulator: every request served or shed exactly once, across replicas."""

from __future__ import annotations

import pytest

from slotune.collector.errors import ConfigError
from slotune.collector.slo import parse_slos
from slotune.collector.workload import Trace, TraceRequest
from slotune.tuner.fleet import POLICY_NAMES, policy_from_name
from slotune.tuner.fleet.pools import parse_pool
from slotune.tuner.fleet.simulator import compare_policies, policy_context, simulate_fleet

POOLS = [parse_pool("short:2:llama-3.1-8b:h100-sxm"), parse_pool("long:1:llama-3.1-8b:h100-sxm")]


def _trace(n: int = 300, gap_s: float = 0.01) -> Trace:
    # a burst of short and long requests, some sharing a prefix, one too long for the engine
    requests = [
        TraceRequest(
            timestamp_s=i * gap_s,
            input_tokens=200 + (i % 7) * 900,
            output_tokens=20 + (i % 5) * 60,
            hash_ids=(1, 2, 100 + i % 11, 200 + i % 11),
            block_size=16,
            session_id=f"s{i % 11}",
        )
        for i in range(n)
    ]
    requests.append(TraceRequest(timestamp_s=n * gap_s, input_tokens=200_000, output_tokens=5))
    return Trace(name="burst", requests=tuple(requests))


@pytest.mark.parametrize("name", [*POLICY_NAMES, "slo-aware:score:ttft=40"])
def test_every_request_is_served_or_shed_exactly_once(name: str) -> None:
    trace = _trace()
    slos = parse_slos(["ttft:p99<=200ms"])
    policy = policy_from_name(name, policy_context(POOLS, trace, slos))
    result = simulate_fleet(POOLS, trace, policy, slos=slos)
    ids = [r.request_id for r in result.records]
    assert ids == [str(i) for i in range(len(trace))]
    errors = result.summary.errors_by_kind
    num_shed = errors.get("shed", 0)
    num_refused = errors.get("http_4xx", 0)
    # the 200k-token prompt: refused by its replica, or shed before it got there
    assert result.records[-1].error in ("http_4xx", "shed") and num_refused <= 1
    routed = sum(r.num_requests for r in result.replicas)
    assert routed + num_shed + num_refused == len(trace)
    assert result.summary.num_completed + num_shed + num_refused == len(trace)
    served = [r for r in result.records if r.error is None]
    assert all(r.output_tokens == trace.requests[int(r.request_id)].output_tokens for r in served)
    if name.startswith("slo-aware:score"):
        assert num_shed > 0


def test_length_pools_keeps_long_requests_off_the_short_pool() -> None:
    trace = _trace()
    ctx = policy_context(POOLS, trace, [])
    assert ctx.long_pools == frozenset({"long"}) and ctx.length_threshold_tokens
    result = simulate_fleet(POOLS, trace, policy_from_name("length-pools", ctx), known_output=True)
    by_pool = {r.pool: r.num_requests for r in result.replicas}
    num_long = sum(
        r.input_tokens + r.output_tokens > ctx.length_threshold_tokens for r in trace.requests[:-1]
    )
    assert by_pool["long"] >= num_long > 0


def test_prefix_affinity_gets_more_prefix_hits_than_round_robin() -> None:
    trace = _trace()
    hit = {
        name: simulate_fleet(POOLS, trace, policy_from_name(name)).figures.prefix_hit_rate
        for name in ("round-robin", "prefix-affinity")
    }
    assert hit["prefix-affinity"] > hit["round-robin"]


def test_compare_ranks_by_goodput_and_rejects_bad_specs_before_running() -> None:
    trace = _trace(60)
    results = compare_policies(POOLS, trace, "round-robin,least-requests")
    assert [r.summary.goodput for r in results] == sorted(
        (r.summary.goodput for r in results), reverse=True
    )
    with pytest.raises(ConfigError, match="unknown policy 'nope'"):
        compare_policies(POOLS, trace, "round-robin,nope")
    with pytest.raises(ConfigError, match="--pool short is given twice"):
        compare_policies([POOLS[0], POOLS[0]], trace, "round-robin")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("a:2:llama-3.1-70b:l4", "--pool a: CUDA out of memory"),
        ("a:-1:llama-3.1-8b:h100-sxm", "REPLICAS '-1'"),
        ("a:1:llama-3.1-8b", "NAME:REPLICAS:MODEL:GPU"),
        ("a:1:llama-3.1-8b:h100-sxm:--max-num-seq 4", "--pool a: unrecognized arguments"),
        ("a:1:nope:h100-sxm", "--pool a: unknown model 'nope'"),
    ],
)
def test_bad_pools_name_the_field(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_pool(spec)


def test_pool_config_from_an_exported_launch_command(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "best.sh"
    path.write_text(
        "# best of study s1\nvllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 48 \\\n"
        "  --max-num-batched-tokens 4096\n"
    )
    pool = parse_pool(f"tuned:2:llama-3.1-8b:h100-sxm:{path}")
    resolved = pool.resolved()
    assert (resolved.max_num_seqs, resolved.max_num_batched_tokens) == (48, 4096)  # type: ignore[union-attr]
    assert pool.model == "llama-3.1-8b"
