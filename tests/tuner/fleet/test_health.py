"""Replica outages on the fleet simulator and the proxy's circuit breakers facing them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slotune.collector.errors import ConfigError
from slotune.collector.workload import Trace, TraceRequest
from slotune.tuner.fleet import policy_from_name
from slotune.tuner.fleet.health import HealthSettings, Outage, OutageKind
from slotune.tuner.fleet.pools import parse_pool
from slotune.tuner.fleet.route_config import BreakerSettings
from slotune.tuner.fleet.simulator import FleetResult, policy_context, simulate_fleet
from slotune.ui.cli import app

POOLS = [parse_pool("a:3:llama-3.1-8b:h100-sxm")]


def _steady(n: int = 400, gap_s: float = 0.1) -> Trace:
    requests = [
        TraceRequest(timestamp_s=i * gap_s, input_tokens=300, output_tokens=40) for i in range(n)
    ]
    return Trace(name="steady", requests=tuple(requests))


def _run(outage: str, health: HealthSettings, policy: str = "least-requests") -> FleetResult:
    trace = _steady()
    ctx = policy_context(POOLS, trace, [], specs=[policy])
    return simulate_fleet(
        POOLS, trace, policy_from_name(policy, ctx), outages=[Outage.parse(outage)], health=health
    )


def test_outage_specs_parse_or_name_the_form() -> None:
    assert Outage.parse("a-1:30:60") == Outage("a-1", 30.0, 60.0, OutageKind.DOWN)
    assert Outage.parse("a-0:0:5:hang").kind is OutageKind.HANG
    for bad in ("a-1", "a-1:x:5", "a-1:5:0", "a-1:5:5:melt", ":5:5"):
        with pytest.raises(ConfigError, match="NAME:AT_S:DURATION_S"):
            Outage.parse(bad)


def test_an_outage_naming_no_replica_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"--outage b-0: no such replica.*a-0, a-1, a-2"):
        _run("b-0:1:1", HealthSettings())


@pytest.mark.parametrize("kind", ["down", "hang"])
@pytest.mark.parametrize("policy", ["round-robin", "least-requests", "score"])
def test_every_request_ends_once_and_the_breaker_ejects_the_failed_replica(
    kind: str, policy: str
) -> None:
    result = _run(f"a-1:10:15:{kind}", HealthSettings(), policy)
    assert [r.request_id for r in result.records] == [str(i) for i in range(400)]
    figures = result.figures
    assert figures.breaker_ejections >= 1
    failed = [r for r in result.records if r.error == "http_5xx"]
    assert len(failed) == figures.failed
    # with the circuit open only the streams cut by the crash and the odd probe are lost
    assert all(r.send_s < 10.0 or 10.0 <= r.send_s <= 26.0 for r in failed)
    assert result.summary.num_completed + len(failed) == 400
    a1 = next(r for r in result.replicas if r.name == "a-1")
    assert a1.num_requests > 0  # it served before the outage and after it closed again


def test_without_a_breaker_a_hung_replica_keeps_taking_requests() -> None:
    with_breaker = _run("a-1:10:15:hang", HealthSettings(), "round-robin")
    without = _run("a-1:10:15:hang", HealthSettings(breaker=None), "round-robin")
    assert without.figures.breaker_ejections == 0
    # round-robin sends a third of 150 arrivals to the hung replica: each a 504
    assert without.figures.failed > 3 * with_breaker.figures.failed
    assert without.figures.failed >= 45


def test_refused_connections_are_retried_elsewhere_and_count_against_the_circuit() -> None:
    # failed /metrics reads alone open the circuit after 3 x 0.5 s; a longer poll interval
    # leaves the refusals of routed requests to do it
    slow_polls = HealthSettings(BreakerSettings(failures=3, open_for_s=10.0), poll_interval_s=60)
    result = _run("a-1:10:15:down", slow_polls, "round-robin")
    figures = result.figures
    assert figures.refused_attempts >= 3 and figures.breaker_ejections >= 1
    refused_only = [r for r in result.records if r.http_status == 502 and r.send_s > 10.0]
    assert all("mid-answer" in (r.error_detail or "") for r in refused_only)


def test_fleet_simulate_replays_an_outage_with_route_config_breakers(tmp_path: Path) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text(
        "backends:\n  - {url: http://127.0.0.1:9, model: llama-3.1-8b}\n"
        "circuit_breaker: {failures: 5, open_for: 30s}\npoll_interval: 2s\n"
    )
    args = ["fleet", "simulate", "--pool", "a:2:llama-3.1-8b:h100-sxm", "--input-len", "300"]
    args += ["--output-len", "40", "--rate", "10", "--num-requests", "200", "--no-store"]
    args += ["--policy", "round-robin", "--outage", "a-1:5:5:hang", "--json"]
    result = CliRunner().invoke(app, [*args, "--route-config", str(config)])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)
    assert entry["breaker_ejections"] >= 1 and entry["failed"] > 0
    bad = CliRunner().invoke(app, [*args[:-3], "--outage", "a-9:5:5"])
    assert bad.exit_code == 1 and "--outage a-9: no such replica" in bad.output


def test_the_fitted_threshold_beats_or_equals_the_token_split_on_its_sample() -> None:
    pools = [
        parse_pool("short:2:llama-3.1-8b:h100-sxm"),
        parse_pool("long:1:llama-3.1-8b:h100-sxm"),
    ]
    requests = [
        TraceRequest(
            timestamp_s=i * 0.02,
            input_tokens=8000 if i % 10 == 0 else 200 + (i % 7) * 300,
            output_tokens=50 + (i % 3) * 100,
        )
        for i in range(300)
    ]
    trace = Trace(name="mix", requests=tuple(requests))
    split = policy_context(pools, trace, [], specs=["least-requests"]).length_threshold_tokens
    fitted = policy_context(pools, trace, [], specs=["length-pools"]).length_threshold_tokens
    explicit = policy_context(pools, trace, [], specs=["length-pools:threshold=900"])
    assert split is not None and fitted is not None
    assert explicit.length_threshold_tokens == split  # given a threshold, nothing is fitted

    def p99(threshold: float) -> float:
        result = simulate_fleet(
            pools, trace, policy_from_name(f"length-pools:threshold={threshold}", explicit)
        )
        value = result.summary.ttft_ms.percentiles[99.0]
        assert value is not None
        return value

    assert p99(fitted) <= p99(split)


def test_replays_report_their_progress_in_simulated_seconds() -> None:
    trace = _steady(n=1100)
    seen: list[float] = []
    ctx = policy_context(POOLS, trace, [])
    simulate_fleet(POOLS, trace, policy_from_name("round-robin", ctx), progress=seen.append)
    assert seen == sorted(seen) and seen[0] == 0.0 and seen[-1] == trace.duration_s
    assert len(seen) == 4  # arrivals 0, 512, 1024, then the end
