"""``diagnose live`` on a store filled by the real agent scraping real HTTP servers on
127.0.0.1 that serve vLLM V1 and DCGM exporter expositions (KV-bound, launch-bound and
healthy engines), and on one scraping a running emulated engine under load."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _tools import running_emulator
from typer.testing import CliRunner

from slotune.collector.agent.base import SourceKind
from slotune.collector.agent.loop import Agent
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import make_target
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.bench import ArrivalSpec, BenchConfig, run_benchmark
from slotune.collector.store import list_diagnoses, open_store, upgrade
from slotune.tuner.diagnose.live import diagnose_live
from slotune.ui.cli import app
from tests.collector.agent.agent_helpers import MetricsServer

T0 = 1_800_000_000.0
STEP_S = 60.0


@dataclass(frozen=True)
class EngineState:
    """Per minute: how the engine's counters grow, and its gauges."""

    running: float
    waiting: float
    kv: float
    preemptions_per_min: float
    queue_s: float  # mean per request
    prefill_s: float
    decode_s: float
    step_tokens: float
    gr_active: float
    sm_active: float
    prefix_hits: float = 0.3


def vllm_text(s: EngineState, minute: int) -> str:
    lb = 'engine="0",model_name="m"'
    n = 100 * minute  # requests finished so far
    lines = []
    for family, mean in (
        ("vllm:request_queue_time_seconds", s.queue_s),
        ("vllm:request_prefill_time_seconds", s.prefill_s),
        ("vllm:request_decode_time_seconds", s.decode_s),
    ):
        lines += [
            f"# TYPE {family} histogram",
            f'{family}_bucket{{{lb},le="1.0"}} {n}',
            f'{family}_bucket{{{lb},le="+Inf"}} {n}',
            f"{family}_sum{{{lb}}} {mean * n}",
            f"{family}_count{{{lb}}} {n}",
        ]
    steps = 1000 * minute
    lines += [
        "# TYPE vllm:iteration_tokens_total histogram",
        f'vllm:iteration_tokens_total_bucket{{{lb},le="+Inf"}} {steps}',
        f"vllm:iteration_tokens_total_sum{{{lb}}} {s.step_tokens * steps}",
        f"vllm:iteration_tokens_total_count{{{lb}}} {steps}",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{lb}}} {s.running}",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{lb}}} {s.waiting}",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{lb}}} {s.kv}",
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{lb}}} {s.preemptions_per_min * minute}",
        "# TYPE vllm:prefix_cache_queries_total counter",
        f"vllm:prefix_cache_queries_total{{{lb}}} {1000.0 * minute}",
        "# TYPE vllm:prefix_cache_hits_total counter",
        f"vllm:prefix_cache_hits_total{{{lb}}} {1000.0 * s.prefix_hits * minute}",
    ]
    return "\n".join(lines) + "\n"


def dcgm_text(s: EngineState) -> str:
    lb = 'gpu="0",UUID="GPU-1",Hostname="n1",modelName="NVIDIA H100 80GB HBM3"'
    fields = {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": s.gr_active,
        "DCGM_FI_PROF_SM_ACTIVE": s.sm_active,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": s.sm_active * 0.6,
        "DCGM_FI_PROF_DRAM_ACTIVE": 0.5,
        "DCGM_FI_PROF_PCIE_TX_BYTES": 1.0e8,
        "DCGM_FI_PROF_PCIE_RX_BYTES": 2.0e8,
    }
    lines = []
    for name, value in fields.items():
        lines += [f"# TYPE {name} gauge", f"{name}{{{lb}}} {value}"]
    return "\n".join(lines) + "\n"


KV_BOUND = EngineState(64, 12, 0.98, 40, 2.0, 0.3, 6.0, 4096, 0.97, 0.9)
LAUNCH_BOUND = EngineState(3, 0, 0.05, 0, 0.001, 0.02, 1.5, 3, 0.35, 0.2)
HEALTHY = EngineState(48, 0.2, 0.6, 0, 0.01, 0.2, 5.0, 2048, 0.92, 0.85)
IDLE = EngineState(0, 0, 0.0, 0, 0.0, 0.0, 0.0, 0, 0.0, 0.0)


def utilization_only_text(s: EngineState) -> str:
    """A DCGM exposition without profiling fields (as on GPUs or setups without DCGM
    profiling): only the NVML-level utilisation, in percent."""
    lb = 'gpu="0",UUID="GPU-1",Hostname="n1"'
    return f"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{{{lb}}} {s.gr_active * 100}\n"


def _fill_store(db: str, tmp_path: Path, state: EngineState, gpu_text=dcgm_text) -> None:
    """Three scrapes of both servers, a minute apart on the agent's clock."""
    now = {"minute": 0}
    vllm = MetricsServer({"/metrics": lambda: vllm_text(state, now["minute"])}).start()
    dcgm = MetricsServer({"/metrics": lambda: gpu_text(state)}).start()
    try:
        targets = [
            make_target(
                SourceKind.VLLM, vllm.url, name="engine-a", node="n1", labels={"pool": "chat"}
            ),
            make_target(SourceKind.DCGM, dcgm.url, name="gpu-n1", node="n1"),
        ]
        writer = StoreWriter(db, Spool(tmp_path / "spool"), flush_interval_s=0.05)
        agent = Agent(targets, writer, timeout_s=2.0, clock=lambda: T0 + STEP_S * now["minute"])
        try:
            for minute in range(3):
                now["minute"] = minute
                asyncio.run(agent.scrape_all_once())
        finally:
            agent.close()
    finally:
        vllm.stop()
        dcgm.stop()


@pytest.fixture
def db(sqlite_url: str) -> str:
    upgrade(sqlite_url)
    return sqlite_url


@pytest.mark.parametrize(
    ("state", "code"),
    [
        (KV_BOUND, "kv-bound"),
        (LAUNCH_BOUND, "launch-bound"),
        (HEALTHY, "healthy"),
        (IDLE, "idle"),
    ],
)
def test_each_case_gives_its_finding(
    db: str, tmp_path: Path, state: EngineState, code: str
) -> None:
    _fill_store(db, tmp_path, state)
    with open_store(db) as store:
        d = diagnose_live(store, window_s=2 * STEP_S, end_ts=T0 + 2 * STEP_S)
    (t,) = d.targets
    assert t.target == "engine-a" and t.gpu_targets == ("gpu-n1",)
    assert [f.code for f in t.findings] == [code]
    f = t.findings[0]
    assert f.evidence["target"] == "engine-a"
    fig = t.figures
    assert fig.kv_usage == pytest.approx(state.kv)
    assert fig.gpu_busy == pytest.approx(state.gr_active)
    assert fig.gpu_busy_source == "dcgm_gr_engine_active"
    assert fig.sm_active == pytest.approx(state.sm_active)
    assert fig.pcie_bytes_per_s == pytest.approx(3.0e8)
    assert fig.preemptions_per_min == pytest.approx(state.preemptions_per_min)
    assert fig.prefix_hit_rate == pytest.approx(state.prefix_hits)
    assert fig.queue_s == pytest.approx(state.queue_s)
    assert fig.decode_s == pytest.approx(state.decode_s)
    assert fig.iteration_tokens == pytest.approx(state.step_tokens)
    if code not in ("healthy", "idle"):
        assert f.parameters and f.tune_command and f.tune_command.startswith("slotune tune")


def test_without_profiling_fields_the_gpu_utilisation_is_used(db: str, tmp_path: Path) -> None:
    _fill_store(db, tmp_path, LAUNCH_BOUND, utilization_only_text)
    with open_store(db) as store:
        (t,) = diagnose_live(store, window_s=120, end_ts=T0 + 120).targets
    assert t.figures.gpu_busy == pytest.approx(LAUNCH_BOUND.gr_active)
    assert t.figures.gpu_busy_source == "gpu_utilization"
    assert t.figures.sm_active is None and t.figures.tensor_active is None
    assert [f.code for f in t.findings] == ["launch-bound"]


def test_kv_bound_finding_names_the_remedy(db: str, tmp_path: Path) -> None:
    _fill_store(db, tmp_path, KV_BOUND)
    with open_store(db) as store:
        (f,) = diagnose_live(store, pool="chat", window_s=120, end_ts=T0 + 120).findings
    assert "KV cache at 98%" in f.title and "40.0 preemptions/min" in f.title
    assert "max_num_seqs" in f.remedy and "gpu_memory_utilization" in f.remedy
    assert set(f.parameters) >= {"max_num_seqs", "gpu_memory_utilization"}


def test_cli_json_is_stored_and_bad_selectors_are_one_line(db: str, tmp_path: Path) -> None:
    _fill_store(db, tmp_path, LAUNCH_BOUND)
    runner = CliRunner()
    base = ["--db", db, "diagnose", "live", "--end", str(T0 + 120), "--window", "2m"]
    result = runner.invoke(app, [*base, "--target", "engine-a", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "live" and data["findings"][0]["code"] == "launch-bound"
    table = runner.invoke(app, [*base, "--no-store"])
    assert table.exit_code == 0 and "launch-bound" in table.output
    for args, expected in (
        (["--target", "nope"], "--target 'nope': no engine target"),
        (["--pool", "batch"], "--pool 'batch': no engine target in that pool (pools: chat)"),
        (["--window", "ten"], "--window: 'ten' is not a duration"),
    ):
        bad = runner.invoke(app, [*base[:-2], *args])
        assert bad.exit_code != 0
        assert expected in " ".join(bad.output.split()), bad.output
    with open_store(db) as store:
        assert [d.result for d in list_diagnoses(store, kind="live")] == [data]


@pytest.fixture
def emulated_engine(tmp_path: Path) -> Iterator[str]:
    # Twice real time: light load, yet about one request always running (at 20x each request
    # was over in ~10 ms and the engine read as idle, under 0.1 running on average).
    with running_emulator(tmp_path / "timings.jsonl", speedup=2) as url:
        yield url


def test_an_emulated_engine_under_light_load_is_healthy(
    db: str, tmp_path: Path, emulated_engine: str
) -> None:
    dcgm = MetricsServer({"/metrics": lambda: dcgm_text(HEALTHY)}).start()
    targets = [
        make_target(SourceKind.VLLM, emulated_engine, name="emulated", node="n1", interval_s=0.25),
        make_target(SourceKind.DCGM, dcgm.url, name="gpu-n1", node="n1", interval_s=0.25),
    ]
    writer = StoreWriter(db, Spool(tmp_path / "spool"), flush_interval_s=0.1)
    agent = Agent(targets, writer, timeout_s=2.0)
    stop = threading.Event()

    def run_agent() -> None:
        async def until_stopped() -> None:
            task = asyncio.create_task(agent.run())
            while not stop.is_set():
                await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        asyncio.run(until_stopped())

    runner = threading.Thread(target=run_agent)
    runner.start()
    try:
        time.sleep(0.6)
        start = time.time()
        result = run_benchmark(
            BenchConfig(
                url=emulated_engine,
                arrival=ArrivalSpec.from_rate(10.0),
                input_len="256",
                output_len="32",
                num_requests=30,
                cooldown=False,
                seed=1,
            )
        )
        time.sleep(0.6)  # two more scrapes after the last response
        end = time.time()
    finally:
        stop.set()
        runner.join(timeout=30)
        agent.close()
        dcgm.stop()
    assert result.summary.num_errors == 0
    with open_store(db) as store:
        d = diagnose_live(store, target="emulated", window_s=end - start, end_ts=end)
    (t,) = d.targets
    fig = t.figures
    assert t.gpu_targets == ("gpu-n1",)
    # phase times from the engine's own request histograms
    assert fig.prefill_s is not None and fig.prefill_s > 0
    assert fig.decode_s is not None and fig.decode_s > 0
    assert fig.queue_s is not None and fig.queue_s >= 0
    assert fig.iteration_tokens is not None and fig.iteration_tokens > 0
    assert fig.kv_usage is not None and fig.kv_usage < 0.5
    assert [f.code for f in t.findings] == ["healthy"]
