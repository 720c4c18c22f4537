"""``tune --engine sglang`` on the launch and attach backends, with the emulated SGLang
(``slotune emulate --engine sglang``: SGLang's flags, routes and ``/metrics``) standing in for
``python -m sglang.launch_server``."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from _tools import SLOTUNE

from slotune.collector.store import upgrade
from slotune.tuner import BackendKind, Engine, ObjectiveKind, RunOptions, StudySpec, tune_study
from slotune.tuner.tune.backends.launch import EngineProcess, default_command, free_port

TEMPLATE = (
    f"{SLOTUNE} emulate --engine sglang --model {{model}} --gpu {{gpu}} --port {{port}} "
    "--speedup 10 {engine_args}"
)
SLOS = ("ttft:p99<=5s",)
NUM_REQUESTS = 12
STARTUP_TIMEOUT_S = 120.0


def spec(name: str, backend: BackendKind, **fields: object) -> StudySpec:
    return StudySpec(
        name=name,
        backend=backend,
        engine=Engine.SGLANG,
        model="llama-3.1-8b",
        gpu="h100-sxm",
        workload="azure-conv",
        trace_file=None,
        slos=SLOS,
        objective=ObjectiveKind.GOODPUT,
        trials=2,
        rate=2.0,
        num_requests=NUM_REQUESTS,
        heartbeat_s=2,
        recheck_k=0,
        **fields,  # type: ignore[arg-type]
    )


def test_without_a_command_the_launch_is_sglangs_own() -> None:
    assert default_command("sglang", "llama-3.1-8b", "h100-sxm") == (
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
        "--enable-metrics --host 127.0.0.1 --port {port} {engine_args}"
    )


def test_attach_reads_what_the_running_sglang_runs(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    port = free_port()
    flags = "--max-running-requests 64 --schedule-policy lpm --chunked-prefill-size 4096"
    argv = shlex.split(
        TEMPLATE.format(model="llama-3.1-8b", gpu="h100-sxm", port=port, engine_args=flags)
    )
    engine = EngineProcess(argv, tmp_path / "engine.log", {}, port)
    try:
        engine.wait_healthy(STARTUP_TIMEOUT_S)
        report = tune_study(
            spec("sglang-attach", BackendKind.ATTACH, endpoint=engine.url, speedup=10),
            sqlite_url,
            RunOptions(),
        ).to_dict()
        assert engine.is_alive()  # attached, never restarted
    finally:
        engine.stop()
    assert report["trials"] == 2 and report["failed"] == 0
    for t in report["trial_details"]:
        server = t["engine"]["server_config"]
        assert server["version"] == "0.5.23"
        assert server["sources"]["max_running_requests"] == "/server_info"
        assert server["values"]["schedule_policy"] == "lpm"
        # The trial's configuration is what the server runs, not what the sampler proposed.
        assert t["config"]["max_running_requests"] == 64
        assert t["config"]["chunked_prefill_size"] == 4096
        assert server["figures"]["max_total_num_tokens"] > 0
        engine_figures = t["engine"]
        # This trial's own requests and prompt tokens, read as deltas of SGLang's counters.
        assert engine_figures["requests_finished"] >= t["measurement"]["num_requests"]
        assert engine_figures["prefix_queries"] > 0
        assert engine_figures["num_samples"] >= 1
        assert engine_figures["requests_running_max"] <= 64


def test_launch_starts_one_emulated_sglang_per_trial_with_its_flags(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upgrade(sqlite_url)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # engine logs of this test stay in tmp_path
    space = {"max_running_requests": [16, 128], "schedule_policy": ["fcfs", "lpm"]}
    report = tune_study(
        spec("sglang-launch", BackendKind.LAUNCH, command=TEMPLATE, speedup=10, space=space),
        sqlite_url,
        RunOptions(),
    ).to_dict()
    assert report["trials"] == 2 and report["failed"] == 0
    for t in report["trial_details"]:
        assert t["failure"] is None
        engine_figures = t["engine"]
        assert engine_figures["startup_s"] >= 0
        assert engine_figures["requests_finished"] >= t["measurement"]["num_requests"]
        assert engine_figures["kv_usage_max"] is not None
    sampled = report["trial_details"][1]["params"]
    assert sampled["max_running_requests"] in (16, 128)
    assert sampled["schedule_policy"] in ("fcfs", "lpm")
