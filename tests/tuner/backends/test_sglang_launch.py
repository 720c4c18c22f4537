"""Starting SGLang: readiness and each failure from its own log, through a stand-in for
``python -m sglang.launch_server`` (``fake_sglang/``) that parses SGLang's flags, prints its
log lines and serves its routes."""

from __future__ import annotations

import shlex
import socket
import sys
from pathlib import Path

import pytest

from slotune.collector.slo import parse_slos
from slotune.collector.workload import named_workload, retime
from slotune.tuner.tune.backends.base import TrialFailed
from slotune.tuner.tune.backends.launch import (
    EndpointSession,
    EngineProcess,
    LaunchBackend,
    default_command,
    free_port,
)
from slotune.tuner.tune.backends.server_config import read_server_config

FAKE = Path(__file__).parent / "fake_sglang"
STARTUP_TIMEOUT_S = 120.0  # generous: the stand-in is up in a second on an idle machine


def start(
    tmp_path: Path, *flags: str, mode: str = "serve", port: int | None = None
) -> EngineProcess:
    port = port or free_port()
    argv = [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *flags,
    ]
    env = {"PYTHONPATH": str(FAKE), "FAKE_SGLANG_MODE": mode}
    return EngineProcess(argv, tmp_path / "engine.log", env, port)


def failure(engine: EngineProcess, timeout_s: float = STARTUP_TIMEOUT_S) -> str:
    try:
        with pytest.raises(TrialFailed) as e:
            engine.wait_healthy(timeout_s)
    finally:
        engine.stop()
    message = str(e.value)
    assert "\n" not in message
    return message


def test_sglang_is_ready_after_its_phases(tmp_path: Path) -> None:
    engine = start(tmp_path, "--max-running-requests", "64", "--schedule-policy", "lpm")
    try:
        progress = engine.wait_healthy(STARTUP_TIMEOUT_S)
    finally:
        engine.stop()
    assert progress.phase == "serving"
    # SGLang compiles nothing by default; every other phase is seen, in SGLang's order.
    assert list(progress.phase_at_s) == [
        "loading the model",
        "allocating the KV cache",
        "capturing graphs",
        "starting the server",
        "serving",
    ]
    assert "fired up and ready to roll" in (tmp_path / "engine.log").read_text()


def test_a_kv_pool_that_does_not_fit_is_the_schedulers_error(tmp_path: Path) -> None:
    message = failure(start(tmp_path, "--mem-fraction-static", "0.1", mode="oom"))
    assert message.startswith("engine exited with code 1 while loading the model")
    assert "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static." in (
        message
    )
    assert "engine.log" in message


def test_a_flag_sglang_does_not_have_is_argparses_line(tmp_path: Path) -> None:
    message = failure(start(tmp_path, "--max-num-seqs", "8"))
    assert "engine exited with code 2" in message
    assert "error: unrecognized arguments: --max-num-seqs 8; the installed engine does not " in (
        message
    )


def test_a_value_sglang_refuses_is_argparses_line(tmp_path: Path) -> None:
    message = failure(start(tmp_path, "--schedule-policy", "sjf"))
    assert "error: argument --schedule-policy: invalid choice: 'sjf'" in message


def test_sglang_not_installed_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "sglang.launch_server", "--port", str(port)]
    engine = EngineProcess(argv, tmp_path / "engine.log", {"PYTHONPATH": ""}, port)
    message = failure(engine)
    assert "No module named 'sglang'; install the engine in the Python that --command runs" in (
        message
    )


def test_a_port_sglang_binds_that_is_taken_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        nccl_port = taken.getsockname()[1]
        message = failure(start(tmp_path, "--nccl-port", str(nccl_port)))
    assert "address already in use; another process holds a port the engine binds" in message


def test_an_engine_still_capturing_graphs_times_out_in_that_phase(tmp_path: Path) -> None:
    message = failure(start(tmp_path, mode="hang"), timeout_s=5)
    assert "not healthy after 5 s, still capturing graphs" in message


def test_an_engine_dying_mid_run_fails_the_trial_with_its_signal(tmp_path: Path) -> None:
    engine = start(tmp_path, mode="die-on-request")
    try:
        engine.wait_healthy(STARTUP_TIMEOUT_S)
        session = EndpointSession(engine.url, "sglang", 1.0, tmp_path, engine)
        trace = retime(named_workload("azure-conv"), num_requests=2)
        with pytest.raises(TrialFailed) as e:
            session.run(trace, parse_slos(["ttft:p99<=2s"]), seed=0)
    finally:
        engine.stop()
    message = str(e.value)
    assert message.startswith("engine died during the run (was killed by SIGSEGV): ")
    assert "Fatal Python error: Segmentation fault" in message


def test_the_adapters_flags_start_sglang_with_that_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(FAKE))
    command = shlex.split(default_command("sglang", "llama-3.1-8b", "h100-sxm"))
    assert command[:3] == ["python", "-m", "sglang.launch_server"]
    template = shlex.join([sys.executable, *command[1:-1]]) + " {engine_args}"
    backend = LaunchBackend(
        template, engine="sglang", model="llama-3.1-8b", gpu="h100-sxm", log_root=tmp_path
    )
    config: dict[str, int | float | bool | str] = {
        "max_running_requests": 64,
        "chunked_prefill_size": 4096,
        "max_prefill_tokens": 8192,
        "mem_fraction_static": 0.85,
        "schedule_policy": "lpm",
        "schedule_conservativeness": 0.8,
        "disable_radix_cache": True,
        "enable_mixed_chunk": True,
    }
    port = free_port()
    engine = EngineProcess(backend.argv(config, port, tmp_path), tmp_path / "engine.log", {}, port)
    try:
        engine.wait_healthy(STARTUP_TIMEOUT_S)
        server = read_server_config(engine.url, tuple(config))
    finally:
        engine.stop()
    # SGLang's own argument parser took every flag, and the server runs those values.
    assert {k: server.values.get(k) for k in config} == config
