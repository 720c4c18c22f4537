"""The launch backend against real ``slotune emulate`` processes."""

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from _tools import SLOTUNE
from optuna.trial import TrialState

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.collector.slo import parse_slos
from slotune.collector.store import upgrade
from slotune.collector.workload import named_workload, retime
from slotune.tuner.sim.config import Engine
from slotune.tuner.tune.backends import BackendKind
from slotune.tuner.tune.backends.attach import AttachBackend
from slotune.tuner.tune.backends.base import TrialFailed
from slotune.tuner.tune.backends.launch import (
    EngineProcess,
    LaunchBackend,
    failure_reason,
    free_port,
    render_command,
)
from slotune.tuner.tune.objectives import ObjectiveKind
from slotune.tuner.tune.run import RunOptions, export_study, resume_study, show_study
from slotune.tuner.tune.study import (
    StudySpec,
    build_space,
    create,
    load_plan,
    open_storage,
    quiet_optuna,
)
from slotune.tuner.tune.trial import TrialRunner, WorkloadPlan

MARKER_SEED = "97531"  # tags the engines this test starts, to find leftovers
TEMPLATE = (
    f"{SLOTUNE} emulate --model {{model}} --gpu {{gpu}} --port {{port}} "
    f"--speedup 10 --seed {MARKER_SEED} {{engine_args}}"
)


def test_engine_error_line_is_the_failure_reason():
    log = (
        "INFO starting\nINFO loading weights\nValueError: No available memory for the cache "
        "blocks. Try increasing `gpu_memory_utilization`.\nINFO shutting down\n"
    )
    assert failure_reason(log).startswith("ValueError: No available memory")
    assert failure_reason("") == "no output"
    # vLLM 0.32 refusing a scheduler config (pydantic's wording)
    pydantic = (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig\n"
        "  Value error, max_num_batched_tokens (16) must be greater than or equal to "
        "max_num_seqs (64). [type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]\n"
        "    For further information visit https://errors.pydantic.dev/2.14/v/value_error\n"
    )
    assert failure_reason(pydantic) == (
        "Value error, max_num_batched_tokens (16) must be greater than or equal to "
        "max_num_seqs (64)."
    )


def engines_left() -> list[str]:
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "emulate" in cmd and f"--seed {MARKER_SEED}" in cmd:
            out.append(proc.name)
    return out


def test_launch_that_crashes_is_infeasible_with_the_engines_reason(tmp_path):
    backend = LaunchBackend(
        TEMPLATE,
        engine="vllm",
        model="llama-3.1-8b",
        gpu="h100-sxm",
        speedup=10,
        startup_timeout_s=60,
        log_root=tmp_path,
    )
    trace = retime(named_workload("azure-conv"), num_requests=5)
    runner = TrialRunner(
        backend,
        WorkloadPlan(trace, rate=2.0),
        tuple(parse_slos(["ttft:p99<=2s"])),
        ObjectiveKind.GOODPUT,
    )
    m = runner.measure({"gpu_memory_utilization": 0.1, "max_model_len": 8192})
    assert not m.is_feasible and m.values == (0.0,)
    assert "No available memory for the cache blocks" in (m.failure or "")
    assert "engine.log" in (m.failure or "")
    assert engines_left() == []


@pytest.mark.slow
def test_full_study_through_launched_emulated_engines(sqlite_url, tmp_path):
    upgrade(sqlite_url)
    os.environ["TMPDIR"] = str(tmp_path)  # engine logs of this test stay in tmp_path
    spec = StudySpec(
        name="launched",
        backend=BackendKind.LAUNCH,
        engine=Engine.VLLM,
        model="llama-3.1-8b",
        gpu="h100-sxm",
        workload="azure-conv",
        trace_file=None,
        slos=("ttft:p99<=2s", "tpot:p99<=100ms"),
        objective=ObjectiveKind.GOODPUT,
        trials=4,
        rate=4.0,
        num_requests=20,
        command=TEMPLATE,
        speedup=10,
        space={
            "max_num_seqs": [64, 256],
            "max_num_batched_tokens": [2048, 8192],
            "gpu_memory_utilization": [0.9, 0.1],
            "long_prefill_token_threshold": None,
        },
        heartbeat_s=2,
    )
    study = create(spec, sqlite_url)
    # A configuration the engine refuses at start: the study records it and goes on.
    space = build_space(spec, load_plan(spec))
    study.enqueue_trial(
        space.params_of(
            {
                "max_num_seqs": 64,
                "max_num_batched_tokens": 2048,
                "enable_chunked_prefill": True,
                "enable_prefix_caching": True,
                "gpu_memory_utilization": 0.1,
            }
        )
    )
    report = resume_study(
        "launched", sqlite_url, RunOptions(recheck_seeds=1), recheck_k=1
    ).to_dict()

    with quiet_optuna():
        trials = optuna.load_study(
            study_name="launched", storage=open_storage(sqlite_url)
        ).get_trials()
    assert [t.state for t in trials].count(TrialState.COMPLETE) == 4
    details = {t["number"]: t for t in report["trial_details"]}
    crashed = details[1]
    assert crashed["config"]["gpu_memory_utilization"] == 0.1
    assert not crashed["feasible"]
    assert "No available memory" in crashed["failure"]
    default = details[0]
    assert default["source"] == "default" and default["failure"] is None
    assert default["measurement"]["num_requests"] == 20
    # Server-side figures scraped from the engine's /metrics after the run.
    assert default["engine"]["prefix_hit_rate"] is not None
    # Sampled during the runs, not read after them.
    assert default["engine"]["num_samples"] >= 1
    assert default["engine"]["kv_usage_max"] is not None
    assert default["limit"] in {"slo", "saturation", "offered_load"}
    assert report["default"]["value"] > 0
    assert show_study("launched", sqlite_url).trials == 4
    assert "\nvllm serve meta-llama/" in export_study("launched", sqlite_url, "vllm")
    assert engines_left() == []
    # The best configuration was re-measured with another seed through a fresh engine.
    assert len(report["robustness"]) == 1
    assert set(report["robustness"][0]["values_by_seed"]) == {"0", "1"}


@pytest.mark.slow
def test_attach_measures_a_running_engine_as_it_is(tmp_path):
    port = free_port()
    engine = EngineProcess(
        shlex.split(
            TEMPLATE.format(model="llama-3.1-8b", gpu="h100-sxm", port=port, engine_args="")
        ),
        tmp_path / "engine.log",
        {},
        port,
    )
    try:
        engine.wait_healthy(60)
        trace = retime(named_workload("azure-conv"), num_requests=8)
        runner = TrialRunner(
            AttachBackend(engine.url, engine="vllm", model="llama-3.1-8b", gpu="h100-sxm"),
            WorkloadPlan(trace, rate=2.0),
            tuple(parse_slos(["ttft:p99<=5s"])),
            ObjectiveKind.GOODPUT,
        )
        m = runner.measure({})
        assert m.failure is None and m.summary is not None
        assert m.summary.num_requests == 8 and m.values[0] > 0
        assert engine.is_alive()  # attached, never restarted
    finally:
        engine.stop()
    gone = TrialRunner(
        AttachBackend(engine.url, engine="vllm", model="llama-3.1-8b", gpu="h100-sxm"),
        WorkloadPlan(trace, rate=2.0),
        tuple(parse_slos(["ttft:p99<=5s"])),
        ObjectiveKind.GOODPUT,
    ).measure({})
    assert "cannot reach" in (gone.failure or "")


def test_engine_dies_with_a_killed_worker(tmp_path):
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"""
import sys, time
from pathlib import Path
from slotune.tuner.tune.backends.launch import EngineProcess, free_port
port = free_port()
e = EngineProcess({shlex.split(TEMPLATE)!r}[:1] + ["emulate", "--model", "llama-3.1-8b",
                  "--port", str(port), "--seed", "{MARKER_SEED}"],
                  Path({str(tmp_path / "engine.log")!r}), {{}}, port)
e.wait_healthy(60)
print("up", flush=True)
time.sleep(600)
""",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "up"
        assert len(engines_left()) == 1
    finally:
        worker.kill()
        worker.wait(10)
        if worker.stdout is not None:
            worker.stdout.close()
    deadline = time.monotonic() + 20
    while engines_left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert engines_left() == []


def test_a_flag_the_installed_vllm_lacks_is_refused_before_the_engine_starts(monkeypatch):
    monkeypatch.setattr("slotune.tuner.engines.vllm.installed_vllm_version", lambda: "0.33.0")
    template = "vllm serve {hf_model} --port {port} --max-num-partial-prefills 2 {engine_args}"
    with pytest.raises(EngineConfigError, match="unrecognized arguments: --max-num-partial"):
        render_command(template, model="llama-3.1-8b", gpu="h100-sxm", port=1, engine_args="")
    backend = LaunchBackend(template, engine="vllm", model="llama-3.1-8b", gpu="h100-sxm")
    with pytest.raises(TrialFailed, match=r"vLLM 0\.33\.0 has no such flag"):
        backend.argv({}, 1, Path("/nonexistent"))
    # the emulated engine and older releases keep the flag
    monkeypatch.setattr("slotune.tuner.engines.vllm.installed_vllm_version", lambda: "0.10.0")
    assert "--max-num-partial-prefills" in render_command(
        template, model="llama-3.1-8b", gpu="h100-sxm", port=1, engine_args=""
    )


def fake_engine(tmp_path: Path, body: str) -> str:
    """A --command template running ``body`` as a Python script (it gets --port N)."""
    script = tmp_path / "engine.py"
    script.write_text(body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} --port {{port}}"


def launch(template: str, tmp_path: Path, startup_timeout_s: float = 60) -> LaunchBackend:
    return LaunchBackend(
        template,
        engine="vllm",
        model="llama-3.1-8b",
        gpu="h100-sxm",
        startup_timeout_s=startup_timeout_s,
        log_root=tmp_path,
    )


def one_trial(backend: LaunchBackend):
    trace = retime(named_workload("azure-conv"), num_requests=2)
    runner = TrialRunner(
        backend,
        WorkloadPlan(trace, rate=1.0),
        tuple(parse_slos(["ttft:p99<=2s"])),
        ObjectiveKind.GOODPUT,
    )
    return runner.measure({})


def test_an_engine_dying_in_start_up_names_its_phase_and_last_log_lines(tmp_path):
    template = fake_engine(
        tmp_path,
        "import sys\nprint('INFO Starting to load model tiny...')\nprint('INFO step 2 of 3')\n"
        "print('RuntimeError: weights are corrupt')\nprint('INFO shutting down')\nsys.exit(3)\n",
    )
    m = one_trial(launch(template, tmp_path))
    assert not m.is_feasible and m.failure is not None and "\n" not in m.failure
    assert "exited with code 3 while loading the model" in m.failure
    assert "RuntimeError: weights are corrupt" in m.failure
    assert "last log lines:" in m.failure and "INFO shutting down" in m.failure


def test_a_missing_engine_executable_is_one_line(tmp_path):
    m = one_trial(launch("/nonexistent/vllm serve x --port {port} {engine_args}", tmp_path))
    assert m.failure == (
        "cannot start '/nonexistent/vllm': No such file or directory; check --command"
    )
    missing_module = one_trial(
        launch(f"{sys.executable} -m no_such_vllm --port {{port}}", tmp_path)
    )
    assert "No module named no_such_vllm" in (missing_module.failure or "")


def test_an_engine_that_never_serves_times_out_with_the_phase_it_was_in(tmp_path):
    template = fake_engine(
        tmp_path,
        "import time\nprint('Compiling a graph for shape 1', flush=True)\ntime.sleep(60)\n",
    )
    m = one_trial(launch(template, tmp_path, startup_timeout_s=2))
    assert "not healthy after 2 s, still compiling" in (m.failure or "")
    assert "--startup-timeout" in (m.failure or "")
    assert engines_left() == []


def test_a_port_in_use_is_one_line(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(TrialFailed, match=f"port {port} on 127.0.0.1 is already in use"):
            EngineProcess(["true"], tmp_path / "engine.log", {}, port)


def test_a_command_without_port_is_refused():
    with pytest.raises(ConfigError, match=r"must pass \{port\}"):
        render_command(
            "vllm serve x --port 8000", model="llama-3.1-8b", gpu="h100-sxm", port=1, engine_args=""
        )
