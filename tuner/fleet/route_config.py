"""``fleet.yaml``: what ``slotune route`` serves, validated with errors naming file:line:field.

::

    policy:                       # a routing policy as `slotune fleet simulate --policy` takes it
      name: score                 # round-robin, least-requests, least-kv, length-pools,
      params: {prefix: 3, queue: 1, kv: 1}   # prefix-affinity, score, slo-aware[:INNER]
    pools: [short, long]          # optional; default: the pools the backends name
    backends:
      - url: http://10.0.0.5:8000 # the engine's base URL
        pool: short               # default: "default"
        model: llama-3.1-8b       # the model it serves (requests for others go elsewhere)
        kind: vllm                # vllm | sglang | trtllm: which /metrics names it exposes
        name: gpu-a               # default: host:port
    poll_interval: 500ms          # how often each backend's /metrics is read
    block_size: 16                # tokens per prefix block hashed for prefix-aware policies
    circuit_breaker: {failures: 3, open_for: 10s}
    timeouts: {connect: 2s, first_byte: 300s, idle: 60s, client: 30s}
    shedding: {max_in_flight: 0, retry_after: 1s, ttft_budget: 500ms}

Every field but ``backends`` has a default. ``policy`` may also be one spec string
(``score:prefix=3:queue=1``). ``length-pools`` sends long requests to the pool named ``long``
unless its ``long`` parameter names others; ``slo-aware`` sheds against
``shedding.ttft_budget`` unless its ``ttft`` parameter (ms) says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload
from urllib.parse import urlsplit

from slotune.collector.agent import SourceKind
from slotune.collector.durations import parse_duration_s
from slotune.collector.errors import ConfigError, SLOSpecError
from slotune.collector.textfile import read_text
from slotune.collector.yamlfile import read_yaml
from slotune.tuner.fleet.length_pools import LengthPools
from slotune.tuner.fleet.policy import RoutingPolicy
from slotune.tuner.fleet.registry import PolicyContext, policy_from_name

_ENGINE_KINDS = tuple(k.value for k in SourceKind if k.is_engine)
_TOP_KEYS = (
    "policy",
    "pools",
    "backends",
    "poll_interval",
    "block_size",
    "circuit_breaker",
    "timeouts",
    "shedding",
)
_BACKEND_KEYS = ("url", "pool", "model", "kind", "name")
_POLICY_KEYS = ("name", "params")
_SECTION_KEYS = {
    "circuit_breaker": ("failures", "open_for"),
    "timeouts": ("connect", "first_byte", "idle", "client"),
    "shedding": ("max_in_flight", "retry_after", "ttft_budget"),
}
DEFAULT_POOL = "default"


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """One engine behind the proxy."""

    name: str
    url: str
    pool: str
    model: str
    kind: SourceKind = SourceKind.VLLM


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """The routing policy as a registry spec (``score:prefix=3``), and where it sits in the file."""

    spec: str = "least-requests"
    where: str = ""


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """Consecutive failures that open a backend's circuit, and how long it stays open."""

    failures: int = 3
    open_for_s: float = 10.0


@dataclass(frozen=True, slots=True)
class TimeoutSettings:
    """Limits on one upstream request (connecting, the response head, the gap between chunks)
    and on the client: ``client_s`` to send a request's head (from connecting, or from the
    previous answer on a kept-alive connection) and again its body; an idle client connection
    is closed after it too."""

    connect_s: float = 2.0
    first_byte_s: float = 300.0
    idle_s: float = 60.0
    client_s: float = 30.0


@dataclass(frozen=True, slots=True)
class ShedSettings:
    """Proxy-level admission: requests in flight beyond ``max_in_flight`` (0: no limit) get 429."""

    max_in_flight: int = 0
    retry_after_s: float = 1.0
    ttft_budget_s: float | None = None


@dataclass(frozen=True, slots=True)
class RouteConfig:
    """A validated ``fleet.yaml``."""

    backends: tuple[BackendSpec, ...]
    pools: tuple[str, ...]
    policy: PolicySpec = field(default_factory=PolicySpec)
    poll_interval_s: float = 0.5
    block_size: int = 16
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    timeouts: TimeoutSettings = field(default_factory=TimeoutSettings)
    shedding: ShedSettings = field(default_factory=ShedSettings)
    source: str = "<config>"

    @property
    def models(self) -> tuple[str, ...]:
        """The models served, in the order the backends first name them."""
        return tuple(dict.fromkeys(b.model for b in self.backends))

    def make_policy(self) -> RoutingPolicy:
        """A fresh policy object for this fleet.

        Raises:
            ConfigError: naming the policy's place in the file, the problem and the fix.
        """
        context = PolicyContext(
            long_pools=frozenset(p for p in self.pools if p == "long"),
            ttft_budget_s=self.shedding.ttft_budget_s,
        )
        try:
            policy = policy_from_name(self.policy.spec, context)
        except ConfigError as e:
            raise ConfigError(f"{self.policy.where}: field 'policy': {e}") from None
        inner = getattr(policy, "inner", policy)  # slo-aware wraps another policy
        if isinstance(inner, LengthPools):
            unknown = sorted(inner.long_pools - set(self.pools))
            if unknown:
                raise ConfigError(
                    f"{self.policy.where}: field 'policy': unknown long pool {unknown[0]!r}; "
                    f"declared pools: {', '.join(self.pools)}"
                )
        return policy


Fail = Callable[[tuple[Any, ...], str], ConfigError]


def load_route_config(path: str | Path) -> RouteConfig:
    """Read and validate a ``fleet.yaml`` file.

    Raises:
        ConfigError: ``file:line: field ...: what is wrong and the accepted form``.
    """
    text = read_text(path, "fleet config", ConfigError)
    return parse_route_config(text, source=str(path))


def parse_route_config(text: str, *, source: str = "<config>") -> RouteConfig:
    """Parse the text of a ``fleet.yaml`` (see :func:`load_route_config`)."""
    data, lines = read_yaml(text, source=source, error=ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}:1: expected a mapping with a 'backends' list")

    def fail(path: tuple[Any, ...], msg: str) -> ConfigError:
        line = lines.get(path, lines.get(path[:-1], 1))
        return ConfigError(f"{source}:{line}: {msg}")

    _check_keys(data, (), _TOP_KEYS, fail)
    for section, keys in _SECTION_KEYS.items():
        if data.get(section) is not None:
            _check_keys(data[section], (section,), keys, fail)
    backends = _backends(data.get("backends"), fail)
    pools = _pools(data.get("pools"), backends, fail)
    config = RouteConfig(
        backends=backends,
        pools=pools,
        policy=_policy(data.get("policy"), source, lines, fail),
        poll_interval_s=_duration(data, ("poll_interval",), 0.5, fail),
        block_size=_positive_int(data, ("block_size",), 16, fail),
        breaker=BreakerSettings(
            failures=_positive_int(data, ("circuit_breaker", "failures"), 3, fail),
            open_for_s=_duration(data, ("circuit_breaker", "open_for"), 10.0, fail),
        ),
        timeouts=TimeoutSettings(
            connect_s=_duration(data, ("timeouts", "connect"), 2.0, fail),
            first_byte_s=_duration(data, ("timeouts", "first_byte"), 300.0, fail),
            idle_s=_duration(data, ("timeouts", "idle"), 60.0, fail),
            client_s=_duration(data, ("timeouts", "client"), 30.0, fail),
        ),
        shedding=ShedSettings(
            max_in_flight=_positive_int(data, ("shedding", "max_in_flight"), 0, fail, zero=True),
            retry_after_s=_duration(data, ("shedding", "retry_after"), 1.0, fail),
            ttft_budget_s=_duration(data, ("shedding", "ttft_budget"), None, fail),
        ),
        source=source,
    )
    config.make_policy()  # a policy that cannot be built fails now, not on the first request
    return config


def _check_keys(value: Any, path: tuple[Any, ...], allowed: tuple[str, ...], fail: Fail) -> None:
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)[1:] or "the file"
    if not isinstance(value, dict):
        raise fail(path, f"field '{where}' must be a mapping with keys {', '.join(allowed)}")
    for key in value:
        if key not in allowed:
            raise fail(
                (*path, key), f"unknown field {key!r} in {where}; allowed: {', '.join(allowed)}"
            )


def _section(data: dict[str, Any], path: tuple[str, ...], fail: Fail) -> Any:
    """The value at ``path`` (None when absent); sections must be mappings."""
    value: Any = data
    for i, key in enumerate(path):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise fail(path[:i], f"field '{'.'.join(path[:i])}' must be a mapping")
        value = value.get(key)
    return value


@overload
def _duration(data: dict[str, Any], path: tuple[str, ...], default: float, fail: Fail) -> float: ...
@overload
def _duration(
    data: dict[str, Any], path: tuple[str, ...], default: None, fail: Fail
) -> float | None: ...
def _duration(
    data: dict[str, Any], path: tuple[str, ...], default: float | None, fail: Fail
) -> float | None:
    value = _section(data, path, fail)
    if value is None:
        return default
    name = ".".join(path)
    try:
        seconds = parse_duration_s(value, field_name=f"field '{name}'")
    except SLOSpecError as e:
        raise fail(path, str(e)) from None
    if seconds <= 0:
        raise fail(path, f"field '{name}' must be positive, got {value!r}")
    return seconds


def _positive_int(
    data: dict[str, Any], path: tuple[str, ...], default: int, fail: Fail, *, zero: bool = False
) -> int:
    value = _section(data, path, fail)
    if value is None:
        return default
    lowest = 0 if zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise fail(path, f"field '{'.'.join(path)}' must be an integer >= {lowest}, got {value!r}")
    return value


def _backends(value: Any, fail: Fail) -> tuple[BackendSpec, ...]:
    if not isinstance(value, list) or not value:
        raise fail(
            ("backends",), "field 'backends' is required: a list of {url, pool, model, kind, name}"
        )
    out = [_backend(item, i, fail) for i, item in enumerate(value)]
    seen: set[str] = set()
    for i, b in enumerate(out):
        if b.name in seen:
            raise fail(
                ("backends", i, "name"),
                f"field 'backends[{i}].name': {b.name!r} is used twice; give each a unique name",
            )
        seen.add(b.name)
    return tuple(out)


def _backend(item: Any, i: int, fail: Fail) -> BackendSpec:
    path = ("backends", i)
    _check_keys(item, path, _BACKEND_KEYS, fail)
    url = item.get("url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise fail(
            (*path, "url"),
            f"field 'backends[{i}].url' must look like http://host:port (the engine's base URL), "
            f"got {url!r}",
        )
    model = item.get("model")
    if not isinstance(model, str) or not model:
        raise fail(
            (*path, "model"),
            f"field 'backends[{i}].model' is required: the model name the engine serves",
        )
    kind_text = str(item.get("kind", SourceKind.VLLM.value))
    if kind_text not in _ENGINE_KINDS:
        raise fail(
            (*path, "kind"),
            f"field 'backends[{i}].kind': unknown engine {kind_text!r}; use one of "
            f"{', '.join(_ENGINE_KINDS)}",
        )
    return BackendSpec(
        name=str(item.get("name") or parts.netloc),
        url=f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}",
        pool=str(item.get("pool") or DEFAULT_POOL),
        model=model,
        kind=SourceKind(kind_text),
    )


def _pools(value: Any, backends: tuple[BackendSpec, ...], fail: Fail) -> tuple[str, ...]:
    if value is None:
        return tuple(dict.fromkeys(b.pool for b in backends))
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise fail(("pools",), "field 'pools' must be a list of pool names, e.g. [short, long]")
    for i, b in enumerate(backends):
        if b.pool not in value:
            raise fail(
                ("backends", i, "pool"),
                f"field 'backends[{i}].pool': unknown pool {b.pool!r}; declared pools: "
                f"{', '.join(value)}",
            )
    return tuple(value)


def _policy(value: Any, source: str, lines: dict[tuple[Any, ...], int], fail: Fail) -> PolicySpec:
    where = f"{source}:{lines.get(('policy',), 1)}"
    if value is None:
        return PolicySpec(where=where)
    if isinstance(value, str) and value:
        return PolicySpec(value, where)
    _check_keys(value, ("policy",), _POLICY_KEYS, fail)
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise fail(("policy", "name"), "field 'policy.name' is required, e.g. least-requests")
    params = value.get("params") or {}
    if not isinstance(params, dict):
        raise fail(("policy", "params"), "field 'policy.params' must be a mapping, e.g. {kv: 1}")
    spec = ":".join([name, *(f"{k}={v}" for k, v in params.items())])
    return PolicySpec(spec, where)
