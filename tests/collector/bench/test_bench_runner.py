"""Whole runs against the fake engine: phases, arrival processes, failures, progress."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace

import pytest
from bench_fakes import FakeEngine, Mode
from rich.console import Console

from slotune.collector.bench import ArrivalKind, ArrivalSpec, BenchConfig, run_benchmark
from slotune.collector.bench.arrivals import arrival_from_flags
from slotune.collector.bench.render import LiveProgress, summary_table
from slotune.collector.bench.runner import arun_benchmark
from slotune.collector.errors import ConfigError
from slotune.collector.records import RequestRecord
from slotune.collector.slo import parse_slos


def _config(engine: FakeEngine, **kw: object) -> BenchConfig:
    base: dict[str, object] = {
        "url": engine.url,
        "arrival": ArrivalSpec.from_rate(200.0),
        "input_len": "20",
        "output_len": "5",
        "num_requests": 12,
    }
    base.update(kw)
    return BenchConfig(**base)  # type: ignore[arg-type]


def _max_overlap(records: list[RequestRecord] | tuple[RequestRecord, ...]) -> int:
    edges = sorted([(r.send_s, 1) for r in records] + [(r.end_s or r.send_s, -1) for r in records])
    level = peak = 0
    for _, d in edges:
        level += d
        peak = max(peak, level)
    return peak


def test_warmup_is_sent_but_left_out(fake_engine: Callable[..., FakeEngine]) -> None:
    engine = fake_engine()
    result = run_benchmark(_config(engine, warmup=3))
    assert [r.request_id for r in result.records] == [f"req-{i}" for i in range(3, 15)]
    assert len(engine.seen) == 15
    s = result.summary.to_dict()
    assert s["num_warmup"] == 3 and s["num_cooldown"] == 0 and s["num_completed"] == 12
    assert s["num_sent"] == 15 and s["num_cooldown_cancelled"] == 0
    assert s["target_rate"] == 200.0 and s["offered_rate"] > 0 and s["achieved_rate"] > 0
    assert all(r.scheduled_s is not None for r in result.records)
    assert s["send_lag_ms"]["p50"] >= 0
    assert result.model == "fake-model"  # discovered from /v1/models
    assert engine.seen[0]["body"]["model"] == "fake-model"


def test_cooldown_keeps_load_until_measured_requests_finish(
    fake_engine: Callable[..., FakeEngine],
) -> None:
    engine = fake_engine(token_delay_s=0.02)
    result = run_benchmark(
        _config(engine, num_requests=6, arrival=ArrivalSpec.from_rate(100.0), cooldown=True)
    )
    s = result.summary.to_dict()
    assert s["num_completed"] == 6 and s["num_cooldown"] >= 1
    last_send = max(r.send_s for r in result.records)
    assert len(engine.seen) > 6
    assert result.records[-1].end_s > last_send
    # every request that reached the server is counted, the cancelled ones too
    assert s["num_sent"] == len(engine.seen) == 6 + s["num_cooldown"]
    assert 0 <= s["num_cooldown_cancelled"] <= s["num_cooldown"]


@pytest.mark.parametrize(
    "arrival",
    [ArrivalSpec.from_rate(100.0), arrival_from_flags(concurrency=3)],
    ids=["open-loop", "closed-loop"],
)
def test_without_cooldown_exactly_the_asked_requests_are_sent(
    fake_engine: Callable[..., FakeEngine], arrival: ArrivalSpec
) -> None:
    # slow responses: a cool-down would have sent more while the measured ones streamed
    engine = fake_engine(token_delay_s=0.02)
    result = run_benchmark(_config(engine, num_requests=6, warmup=2, arrival=arrival))
    s = result.summary.to_dict()
    assert len(engine.seen) == s["num_sent"] == 8
    assert s["num_requests"] == 6 and s["num_cooldown"] == 0


def test_concurrency_bounds_requests_in_flight(fake_engine: Callable[..., FakeEngine]) -> None:
    engine = fake_engine(token_delay_s=0.004)
    config = _config(engine, arrival=arrival_from_flags(concurrency=3), num_requests=15, warmup=2)
    result = run_benchmark(config)
    assert len(result.records) == 15
    assert _max_overlap(result.records) <= 3
    assert result.offered_rate is None and result.achieved_rate is not None
    assert all(r.scheduled_s is None for r in result.records)


def test_duration_runs_measure_a_time_window(fake_engine: Callable[..., FakeEngine]) -> None:
    engine = fake_engine()
    open_loop = run_benchmark(
        _config(engine, num_requests=None, duration_s=0.5, arrival=ArrivalSpec.from_rate(60.0))
    )
    assert 15 <= len(open_loop.records) <= 50
    closed = run_benchmark(
        _config(
            engine, num_requests=None, duration_s=0.4, arrival=arrival_from_flags(concurrency=2)
        )
    )
    sends = [r.send_s for r in closed.records]
    # A request is measured when it is started inside the window; its send stamp comes later,
    # by however long a loaded machine takes to run the task, so the bound is the window plus a
    # second: enough to catch a window that never closes, not a slow scheduler.
    assert len(sends) >= 4 and max(sends) - min(sends) < 0.4 + 1.0


def test_trace_timing_replays_a_bundled_trace(fake_engine: Callable[..., FakeEngine]) -> None:
    engine = fake_engine()
    config = BenchConfig(
        url=engine.url,
        workload="mooncake-synthetic",
        num_requests=8,
        arrival=ArrivalSpec(ArrivalKind.TRACE, time_scale=0.0005),
        endpoint="chat",
    )
    result = run_benchmark(config)
    assert len(result.records) == 8 and result.summary.num_errors == 0
    assert engine.seen[0]["body"]["max_completion_tokens"] > 0


def test_failures_are_recorded_and_the_run_goes_on(fake_engine: Callable[..., FakeEngine]) -> None:
    modes = [Mode.OK, Mode.HTTP_500, Mode.DROP, Mode.STALL, Mode.GARBAGE]
    engine = fake_engine(mode_of=lambda rid: modes[int(rid.split("-")[1]) % len(modes)])
    result = run_benchmark(
        _config(engine, num_requests=10, timeout_s=0.5, slos=tuple(parse_slos(["error_rate<=10%"])))
    )
    s = result.summary.to_dict()
    assert s["num_requests"] == 10 and s["num_completed"] == 2
    assert s["errors_by_kind"] == {"http_5xx": 2, "disconnect": 2, "timeout": 2, "protocol": 2}
    assert s["slos_met"] is False


def test_progress_display_sees_every_measured_request(
    fake_engine: Callable[..., FakeEngine],
) -> None:
    import asyncio

    engine = fake_engine()
    out = io.StringIO()
    sink = LiveProgress(parse_slos(["ttft:p99<=1s"]), Console(file=out, width=120))
    recorded: list[str] = []
    original = sink.record
    sink.record = lambda r: (recorded.append(r.request_id), original(r))[1]  # type: ignore
    result = asyncio.run(arun_benchmark(_config(engine, warmup=2), progress=sink))
    assert sorted(recorded) == sorted(r.request_id for r in result.records)
    table = io.StringIO()
    Console(file=table, width=160).print(summary_table(result.summary))
    assert "ttft" in table.getvalue() and "goodput" in table.getvalue()


def test_unreachable_server_for_model_discovery_is_a_config_error(
    fake_engine: Callable[..., FakeEngine],
) -> None:
    engine = fake_engine()
    port = engine.port
    engine.stop()
    config = BenchConfig(
        url=f"http://127.0.0.1:{port}",
        arrival=ArrivalSpec.from_rate(1.0),
        input_len="4",
        output_len="4",
        num_requests=1,
    )
    with pytest.raises(ConfigError, match="cannot reach"):
        run_benchmark(config)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"workload": "azure-conv"}, "exactly one workload"),
        ({"input_len": None, "output_len": None}, "exactly one workload"),
        ({"output_len": None}, "both --input-len"),
        ({"duration_s": 5.0}, "not both"),
        ({"arrival": ArrivalSpec(ArrivalKind.TRACE)}, "synthetic workloads have no timestamps"),
        ({"num_requests": 0}, "at least 1"),
        ({"timeout_s": 0.0}, "--timeout"),
        ({"url": "localhost:8000"}, "http://"),
    ],
)
def test_bad_configs_are_refused_up_front(kw: dict[str, object], match: str) -> None:
    base = BenchConfig(
        url="http://127.0.0.1:1",
        arrival=ArrivalSpec.from_rate(1.0),
        input_len="4",
        output_len="4",
        num_requests=1,
    )
    with pytest.raises(ConfigError, match=match):
        replace(base, **kw)


def test_config_json_never_holds_the_api_key() -> None:
    config = BenchConfig(
        url="http://127.0.0.1:1",
        arrival=ArrivalSpec.from_rate(1.0),
        input_len="4",
        output_len="4",
        api_key="sk-123",
    )
    assert "sk-123" not in repr(config) and "sk-123" not in str(config.to_dict())
    assert config.to_dict()["api_key_set"] is True
    assert config.with_rate(5.0).arrival.rate == 5.0
