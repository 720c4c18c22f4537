"""fleet.yaml: the example parses; every mistake is one line naming file:line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotune.collector.agent.base import SourceKind
from slotune.collector.errors import ConfigError
from slotune.tuner.fleet.length_pools import LengthPools
from slotune.tuner.fleet.route_config import load_route_config, parse_route_config

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fleet.yaml"

GOOD = """\
policy:
  name: score
  params: {prefix: 3, queue: 1, kv: 1}
pools: [short, long]
backends:
  - {url: http://127.0.0.1:8001, pool: short, model: m}
  - {url: http://127.0.0.1:8002/, pool: long, model: m, kind: sglang, name: big}
poll_interval: 250ms
circuit_breaker: {failures: 5, open_for: 30s}
timeouts: {connect: 1s, first_byte: 2m, idle: 10s}
shedding: {max_in_flight: 100, retry_after: 2s, ttft_budget: 500ms}
"""


def test_the_example_parses_and_builds_its_policy() -> None:
    config = load_route_config(EXAMPLE)
    assert config.pools == ("short", "long")
    assert [b.name for b in config.backends] == ["short-a", "short-b", "short-c", "long-a"]
    policy = config.make_policy()
    assert isinstance(policy, LengthPools)
    assert policy.long_pools == frozenset({"long"})


def test_every_field() -> None:
    c = parse_route_config(GOOD, source="fleet.yaml")
    assert c.policy.spec == "score:prefix=3:queue=1:kv=1"
    assert c.backends[0].name == "127.0.0.1:8001"
    assert c.backends[1].url == "http://127.0.0.1:8002"
    assert c.backends[1].kind is SourceKind.SGLANG
    assert c.backends[1].name == "big"
    assert c.poll_interval_s == 0.25
    assert (c.breaker.failures, c.breaker.open_for_s) == (5, 30.0)
    assert (c.timeouts.connect_s, c.timeouts.first_byte_s, c.timeouts.idle_s) == (1.0, 120.0, 10.0)
    assert (c.shedding.max_in_flight, c.shedding.retry_after_s) == (100, 2.0)
    assert c.shedding.ttft_budget_s == 0.5
    assert c.models == ("m",)


def test_defaults_and_policy_as_a_string() -> None:
    c = parse_route_config(
        "policy: slo-aware:least-kv\nbackends: [{url: 'http://h:1', model: m}]\n"
        "shedding: {ttft_budget: 1s}\n"
    )
    assert c.pools == ("default",)
    assert c.make_policy().name == "slo-aware:least-kv"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("circuit_breaker: {failures: 5", "circuit_breaker: {failurs: 5"),
            "fleet.yaml:9: unknown field 'failurs' in circuit_breaker; allowed: failures, open_for",
        ),
        (
            ("poll_interval: 250ms", "pol_interval: 250ms"),
            "fleet.yaml:8: unknown field 'pol_interval' in the file",
        ),
        (
            ("pool: long, model: m,", "pool: lng, model: m,"),
            "fleet.yaml:7: field 'backends[1].pool': unknown pool 'lng'; declared pools: short, long",
        ),
        (
            ("url: http://127.0.0.1:8001,", "url: 127.0.0.1:8001,"),
            "fleet.yaml:6: field 'backends[0].url' must look like http://host:port",
        ),
        (
            (", pool: short, model: m}", ", pool: short}"),
            "fleet.yaml:6: field 'backends[0].model' is required",
        ),
        (
            ("kind: sglang", "kind: tgi"),
            "fleet.yaml:7: field 'backends[1].kind': unknown engine 'tgi'; use one of vllm, sglang, trtllm",
        ),
        (
            ("open_for: 30s", "open_for: soon"),
            "fleet.yaml:9: field 'circuit_breaker.open_for': 'soon' is not a duration",
        ),
        (
            ("max_in_flight: 100", "max_in_flight: -1"),
            "fleet.yaml:11: field 'shedding.max_in_flight' must be an integer >= 0, got -1",
        ),
        (("name: score", "name: scor"), "fleet.yaml:1: field 'policy': unknown policy 'scor'"),
        (
            ("kv: 1}", "kv: 1, cache: 2}"),
            "fleet.yaml:1: field 'policy': policy 'score:prefix=3:queue=1:kv=1:cache=2': unknown key cache",
        ),
        (
            ("name: big", "name: 127.0.0.1:8001"),
            "fleet.yaml:7: field 'backends[1].name': '127.0.0.1:8001' is used twice",
        ),
        (("pools: [short, long]", "pools: [short, long"), "fleet.yaml:5: not valid YAML"),
    ],
    ids=lambda v: v[1] if isinstance(v, tuple) else v.split(": ", 1)[-1][:40],
)
def test_mistakes_name_the_line_and_field(change: tuple[str, str], expected: str) -> None:
    old, new = change
    assert old in GOOD
    with pytest.raises(ConfigError) as e:
        parse_route_config(GOOD.replace(old, new), source="fleet.yaml")
    assert str(e.value).startswith(expected), str(e.value)
    assert "\n" not in str(e.value)


def test_a_long_pool_that_is_not_declared() -> None:
    text = (
        "policy: length-pools:threshold=100:long=big\nbackends: [{url: 'http://h:1', model: m}]\n"
    )
    with pytest.raises(
        ConfigError, match=r"^fleet.yaml:1: field 'policy': unknown long pool 'big'"
    ):
        parse_route_config(text, source="fleet.yaml")


def test_missing_backends_and_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^f:1: field 'backends' is required"):
        parse_route_config("policy: round-robin\n", source="f")
    with pytest.raises(ConfigError, match=r"cannot read the fleet config"):
        load_route_config(tmp_path / "absent.yaml")
