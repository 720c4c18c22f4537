"""The fleet simulator: every request served or shed exactly once, across replicas."""

from __future__ import annotations

import random

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


def _conversations(num_sessions: int, gap_s: float) -> Trace:
    """Three turns of ``num_sessions`` conversations, each turn's prompt the previous one plus
    8 blocks of 512 tokens, sessions in a random order each turn."""
    rng = random.Random(0)
    requests = []
    t = 0.0
    for turn in range(3):
        order = list(range(num_sessions))
        rng.shuffle(order)
        for s in order:
            n = 8 * (turn + 1)
            requests.append(
                TraceRequest(
                    timestamp_s=t,
                    input_tokens=512 * n,
                    output_tokens=32,
                    hash_ids=tuple(1000 * s + b for b in range(n)),
                    block_size=512,
                )
            )
            t += rng.expovariate(1 / gap_s)
    return Trace(name="conversations", requests=tuple(requests))


# 4 replicas with about 48k tokens of KV cache each
SMALL_KV = [
    parse_pool("a:4:llama-3.1-8b:h100-sxm:--gpu-memory-utilization 0.3 --max-model-len 32768")
]


@pytest.mark.parametrize(
    ("num_sessions", "gap_s", "prefixes_fit"),
    # 8 conversations: 16k-token prompts per replica fit; 40: a turn's prefix is evicted
    # (about 80k tokens per replica since) before the next turn comes
    [(8, 0.15, True), (40, 0.2, False)],
)
def test_prefix_affinity_never_loses_to_least_requests_and_hits_where_prefixes_fit(
    num_sessions: int, gap_s: float, prefixes_fit: bool
) -> None:
    trace = _conversations(num_sessions, gap_s)
    results = {
        name: simulate_fleet(SMALL_KV, trace, policy_from_name(name))
        for name in ("least-requests", "prefix-affinity")
    }
    affinity, least = (results[n].summary.ttft_ms for n in ("prefix-affinity", "least-requests"))
    assert affinity.mean is not None and least.mean is not None
    assert affinity.mean <= 1.02 * least.mean
    assert (affinity.percentiles[90.0] or 0) <= 1.02 * (least.percentiles[90.0] or 0)
    hit = {n: r.figures.prefix_hit_rate for n, r in results.items()}
    if prefixes_fit:
        assert hit["prefix-affinity"] > 2 * hit["least-requests"]
