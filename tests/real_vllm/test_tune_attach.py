"""``tune --backend attach`` on the shared real vLLM: the configuration it really runs, and
counters as each trial's own change, never the server's lifetime figures."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from _tune_workload import NUM_REQUESTS, RATE, SLOS, write_short_trace
from _vllm import MAX_MODEL_LEN

from slotune.collector.errors import ConfigError
from slotune.collector.store import upgrade
from slotune.tuner import BackendKind, Engine, ObjectiveKind, RunOptions, StudySpec, tune_study
from slotune.tuner.tune.run import export_study

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def cache_label(metrics: str, name: str) -> str:
    m = re.search(r"^vllm:cache_config_info\{[^}]*\b" + name + r'="([^"]*)"', metrics, re.M)
    assert m, f"cache_config_info has no {name}"
    return m.group(1)


def test_attach_reports_what_the_server_runs_and_per_trial_deltas(
    real_vllm: str, sqlite_url: str, tmp_path: Path
) -> None:
    upgrade(sqlite_url)
    spec = StudySpec(
        name="real-attach",
        backend=BackendKind.ATTACH,
        engine=Engine.VLLM,
        model="llama-3.1-8b",
        gpu="h100-sxm",
        workload=None,
        trace_file=str(write_short_trace(tmp_path / "short.jsonl")),
        slos=SLOS,
        objective=ObjectiveKind.GOODPUT,
        trials=2,
        rate=RATE,
        num_requests=NUM_REQUESTS,
        endpoint=real_vllm,
        heartbeat_s=5,
        recheck_k=0,
    )
    report = tune_study(spec, sqlite_url, RunOptions()).to_dict()
    metrics = httpx.get(f"{real_vllm}/metrics", timeout=30).text

    def lifetime(counter: str) -> float:
        """The server's counter since it started, summed over its label sets."""
        values = re.findall(r"^vllm:" + counter + r"_total\{[^}]*\} (\S+)", metrics, re.M)
        assert values, counter
        return sum(float(v) for v in values)

    assert report["trials"] == 2 and report["failed"] == 0
    for t in report["trial_details"]:
        server = t["engine"]["server_config"]
        assert server["version"] == "0.32.0"
        # Read from the server, not the tuner's assumed defaults (block_size 16, 0.9, ...).
        assert t["config"]["max_model_len"] == MAX_MODEL_LEN
        assert server["sources"]["max_model_len"] == "/v1/models"
        assert server["values"]["block_size"] == int(cache_label(metrics, "block_size"))
        assert t["config"]["gpu_memory_utilization"] == float(
            cache_label(metrics, "gpu_memory_utilization")
        )
        assert server["sources"]["enable_prefix_caching"] == "cache_config_info"
        # The shared server runs vLLM's defaults: no scheduler flag on its command line, and
        # vLLM does not expose them over HTTP.
        assert {"max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill"} <= set(
            server["unknown"]
        )
        engine = t["engine"]
        # This trial's requests (every run of it: one that did not keep up is run again on
        # more requests), not the server's since it started.
        assert engine["requests_finished"] >= t["measurement"]["num_requests"] >= NUM_REQUESTS
        assert 0 < engine["prefix_queries"] < lifetime("prefix_cache_queries")
        assert engine["prefix_hits"] <= engine["prefix_queries"]
        assert engine["num_samples"] >= 1 and engine["requests_running_max"] is not None
    finished = [t["engine"]["requests_finished"] for t in report["trial_details"]]
    assert sum(finished) < lifetime("request_success")  # warm-up and other tests' requests too
    # One deployment measured twice: no gain is claimed between its own trials, no parameter
    # was varied, and there is nothing to export.
    assert report["gain"] in (None, 1.0)
    assert all(t["params"] == {} for t in report["trial_details"])
    with pytest.raises(ConfigError, match="changes no parameter"):
        export_study("real-attach", sqlite_url, "vllm")
