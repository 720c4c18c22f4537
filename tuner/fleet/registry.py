"""Routing policies by name: ``policy_from_name("score:prefix=2:queue=1:kv=1", context)``.

Spec: ``NAME[:key=value…]``; ``slo-aware[:INNER][:key=value…]`` puts admission on top of
INNER (default ``least-requests``), its own keys being ``margin`` and ``ttft`` (ms), the
others going to INNER.

| name | keys |
|---|---|
| round-robin, least-requests, least-kv | — |
| length-pools | ``threshold`` (tokens), ``long`` (pool name; ``+`` joins several) |
| prefix-affinity | ``load`` (bound factor, 1.25), ``blocks`` (key blocks, 2), ``hit`` (queue worth of a mean-prompt hit, 1) |
| score | ``prefix`` (3), ``queue`` (1), ``kv`` (1) |
| slo-aware | ``margin`` (1.0), ``ttft`` (ms; default: the TTFT SLO) |
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from slotune.collector.errors import ConfigError
from slotune.collector.vocabulary import PolicyKind
from slotune.tuner.fleet.least_kv import LeastKv
from slotune.tuner.fleet.least_requests import LeastRequests
from slotune.tuner.fleet.length_pools import LengthPools
from slotune.tuner.fleet.policy import RoutingPolicy
from slotune.tuner.fleet.prefix_affinity import (
    DEFAULT_HIT_WEIGHT,
    DEFAULT_LOAD_FACTOR,
    DEFAULT_PREFIX_BLOCKS,
    PrefixAffinity,
)
from slotune.tuner.fleet.round_robin import RoundRobin
from slotune.tuner.fleet.score import DEFAULT_WEIGHTS, Score
from slotune.tuner.fleet.slo_aware import DEFAULT_MARGIN, SloAware

SLO_AWARE = PolicyKind.SLO_AWARE.value


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What the fleet tells the policies that need it.

    Attributes:
        long_pools: pools that take long requests (length-pools without ``long=``).
        length_threshold_tokens: length-pools' threshold without ``threshold=`` (chosen from
            the trace and the pools' capacities by the caller).
        ttft_budget_s: slo-aware's budget without ``ttft=`` (the TTFT SLO's threshold).
        pool_names: the fleet's pools, to refuse a ``long=`` naming none (empty: unchecked).
    """

    long_pools: frozenset[str] = frozenset()
    length_threshold_tokens: float | None = None
    ttft_budget_s: float | None = None
    pool_names: frozenset[str] = frozenset()


def _num(spec: str, params: dict[str, str], key: str, default: float) -> float:
    text = params.pop(key, None)
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"policy {spec!r}: {key}={text!r} is not a number") from None


def _length_pools(spec: str, params: dict[str, str], ctx: PolicyContext) -> RoutingPolicy:
    long = params.pop("long", None)
    pools = frozenset(long.split("+")) if long else ctx.long_pools
    threshold = _num(spec, params, "threshold", ctx.length_threshold_tokens or 0.0)
    if not pools:
        raise ConfigError(
            f"policy {spec!r}: length-pools needs a long pool; name a pool 'long' or pass "
            "length-pools:long=POOL"
        )
    unknown = sorted(pools - ctx.pool_names) if ctx.pool_names else []
    if unknown:
        raise ConfigError(
            f"policy {spec!r}: no pool named {', '.join(unknown)}; the pools are "
            f"{', '.join(sorted(ctx.pool_names))}"
        )
    if threshold <= 0:
        raise ConfigError(f"policy {spec!r}: pass length-pools:threshold=TOKENS")
    return LengthPools(threshold, pools)


def _prefix_affinity(spec: str, params: dict[str, str], ctx: PolicyContext) -> RoutingPolicy:
    return PrefixAffinity(
        _num(spec, params, "load", DEFAULT_LOAD_FACTOR),
        int(_num(spec, params, "blocks", DEFAULT_PREFIX_BLOCKS)),
        _num(spec, params, "hit", DEFAULT_HIT_WEIGHT),
    )


def _score(spec: str, params: dict[str, str], ctx: PolicyContext) -> RoutingPolicy:
    wp, wq, wk = DEFAULT_WEIGHTS
    return Score(
        _num(spec, params, "prefix", wp),
        _num(spec, params, "queue", wq),
        _num(spec, params, "kv", wk),
    )


# Adding a policy is its module, its PolicyKind and one line here (slo-aware wraps the others).
_BUILDERS: Mapping[str, Callable[[str, dict[str, str], PolicyContext], RoutingPolicy]] = {
    PolicyKind.ROUND_ROBIN: lambda spec, params, ctx: RoundRobin(),
    PolicyKind.LEAST_REQUESTS: lambda spec, params, ctx: LeastRequests(),
    PolicyKind.LEAST_KV: lambda spec, params, ctx: LeastKv(),
    PolicyKind.LENGTH_POOLS: _length_pools,
    PolicyKind.PREFIX_AFFINITY: _prefix_affinity,
    PolicyKind.SCORE: _score,
}
POLICY_NAMES: tuple[str, ...] = tuple(k.value for k in PolicyKind)


def policy_from_name(spec: str, context: PolicyContext | None = None) -> RoutingPolicy:
    """Build a fresh policy from its spec (each call returns a new, unshared object).

    Raises:
        ConfigError: unknown policy or key, a bad value, or a missing pool/threshold/budget.
    """
    ctx = context or PolicyContext()
    name, *rest = spec.strip().split(":")
    inner_name = "least-requests"
    if name == SLO_AWARE and rest and "=" not in rest[0]:
        inner_name, *rest = rest
    params: dict[str, str] = {}
    for item in rest:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"policy {spec!r}: {item!r} should be key=value")
        params[key] = value
    if name == SLO_AWARE:
        margin = _num(spec, params, "margin", DEFAULT_MARGIN)
        ttft_ms = _num(spec, params, "ttft", (ctx.ttft_budget_s or 0.0) * 1000)
        inner = _build(spec, inner_name, params, ctx)
        return SloAware(inner, ttft_ms / 1000, margin)
    return _build(spec, name, params, ctx)


def _build(spec: str, name: str, params: dict[str, str], ctx: PolicyContext) -> RoutingPolicy:
    builder = _BUILDERS.get(name)
    if builder is None:
        raise ConfigError(
            f"unknown policy {name!r} in {spec!r}; use one of {', '.join(POLICY_NAMES)}"
        )
    policy = builder(spec, params, ctx)
    if params:
        raise ConfigError(f"policy {spec!r}: unknown key {', '.join(params)} for {name}")
    return policy
