"""``tune --backend launch`` starting real vLLM per trial, and its exported command re-launched."""

from __future__ import annotations

import shlex
from pathlib import Path

import httpx
import pytest
from _tools import free_port
from _tune_workload import NUM_REQUESTS, RATE, SLOS, offline_engine_env, write_short_trace
from _vllm import start_vllm, vllm_python

from slotune.collector.slo import parse_slos
from slotune.collector.store import upgrade
from slotune.collector.workload.traces import load_trace
from slotune.tuner import BackendKind, Engine, ObjectiveKind, RunOptions, StudySpec, tune_study
from slotune.tuner.tune.backends.launch import LaunchBackend
from slotune.tuner.tune.backends.server_config import read_server_config
from slotune.tuner.tune.run import export_study
from slotune.tuner.tune.trial import TrialRunner, WorkloadPlan

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

# The study test is about the trials and the exported command, not about how fast the machine
# is: an SLO the tiny model meets at any load, so a configuration is always there to export.
SLOS_AT_ANY_LOAD = ("ttft:p99<=60s",)


def template(model_dir: Path) -> str:
    return (
        f"{shlex.quote(str(vllm_python()))} -m vllm.entrypoints.openai.api_server "
        f"--model {shlex.quote(str(model_dir))} --host 127.0.0.1 --port {{port}} "
        "--enforce-eager {engine_args}"
    )


def test_two_trials_over_two_parameters_then_the_exported_command_serves(
    tiny_model: Path, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline_engine_env(monkeypatch)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # engine logs stay in tmp_path
    upgrade(sqlite_url)
    spec = StudySpec(
        name="real-launch",
        backend=BackendKind.LAUNCH,
        engine=Engine.VLLM,
        model="llama-3.1-8b",
        gpu="h100-sxm",
        workload=None,
        trace_file=str(write_short_trace(tmp_path / "short.jsonl")),
        slos=SLOS_AT_ANY_LOAD,
        objective=ObjectiveKind.GOODPUT,
        trials=2,
        rate=RATE,
        num_requests=NUM_REQUESTS,
        command=template(tiny_model),
        space={
            "max_num_seqs": [2, 16],
            "max_num_batched_tokens": [512, 2048],
            "enable_chunked_prefill": True,
            "enable_prefix_caching": True,
            "gpu_memory_utilization": 0.9,
            "long_prefill_token_threshold": None,
        },
        heartbeat_s=5,
        recheck_k=0,
    )
    report = tune_study(spec, sqlite_url, RunOptions()).to_dict()

    assert report["trials"] == 2 and report["failed"] == 0
    trials = report["trial_details"]
    assert [t["source"] for t in trials] == ["default", "sampler"]
    for t in trials:
        # A run that did not keep up is run again on more requests (tuner.tune.steady).
        assert t["failure"] is None and t["measurement"]["num_requests"] >= NUM_REQUESTS
        engine = t["engine"]
        # Sampled while the requests ran: the engine never runs more than it may. (Whether a
        # sample catches a request running depends on how fast the machine serves it.)
        assert engine["num_samples"] >= 1
        assert 0 <= engine["requests_running_max"] <= t["config"]["max_num_seqs"]
        assert engine["kv_usage_max"] is not None
        # This trial's own requests (every run of it), not the engine's since start.
        assert engine["requests_finished"] >= t["measurement"]["num_requests"]
        assert engine["startup_s"] > 0 and "loading the model" in engine["startup_phases_s"]
        assert t["limit"] in {"slo", "saturation", "offered_load"}
    assert trials[1]["params"]["max_num_seqs"] in (2, 16)
    assert trials[1]["params"]["max_num_batched_tokens"] in (512, 2048)
    if trials[0]["limit"] == "offered_load":
        assert report["gain"] is None or report["gain_note"]

    text = export_study("real-launch", sqlite_url, "vllm")
    # It names the model the trials served, not the catalog model the simulator knows.
    assert f"serving {tiny_model}" in text.splitlines()[0]
    exported = shlex.split(text, comments=True)
    assert exported[:3] == ["vllm", "serve", str(tiny_model)]
    flags = exported[3:]
    best = report["best"]["config"]
    with start_vllm(tiny_model, port=free_port(), extra_args=flags, log_dir=tmp_path) as url:
        served = httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]
        body = {"model": served, "prompt": "The engine", "max_tokens": 8, "ignore_eos": True}
        reply = httpx.post(f"{url}/v1/completions", json=body, timeout=120).json()
        assert reply["usage"]["completion_tokens"] == 8
        running = read_server_config(url, ["max_num_seqs", "max_num_batched_tokens"])
    assert running.values["max_num_seqs"] == best["max_num_seqs"]
    assert running.values["max_num_batched_tokens"] == best["max_num_batched_tokens"]
    assert running.values["max_model_len"] == best["max_model_len"]


def test_a_configuration_vllm_refuses_is_infeasible_in_vllms_words(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline_engine_env(monkeypatch)
    backend = LaunchBackend(
        template(tiny_model),
        engine="vllm",
        model="llama-3.1-8b",
        gpu="h100-sxm",
        log_root=tmp_path,
    )
    runner = TrialRunner(
        backend,
        WorkloadPlan(load_trace(write_short_trace(tmp_path / "t.jsonl", n=4)), rate=RATE),
        tuple(parse_slos(SLOS)),
        ObjectiveKind.GOODPUT,
    )
    m = runner.measure({"max_num_seqs": 64, "max_num_batched_tokens": 16, "max_model_len": 2048})
    assert not m.is_feasible and m.failure is not None and "\n" not in m.failure
    assert "max_num_batched_tokens" in m.failure and "engine.log" in m.failure
