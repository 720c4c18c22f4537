"""``slotune sim`` end to end through the real Typer app."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from slotune.ui.cli import app

BASE = ["sim", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]


def test_sim_json_with_engine_flags() -> None:
    result = CliRunner().invoke(
        app,
        [
            *BASE,
            "--workload",
            "azure-conv",
            "--num-requests",
            "60",
            "--max-num-seqs",
            "16",
            "--no-enable-prefix-caching",
            "--slo",
            "ttft:p99<=2s",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    summary, config = data["summary"], data["config"]
    for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        assert {"mean", "p50", "p90", "p95", "p99"} <= set(summary[metric])
    for key in (
        "request_throughput",
        "output_token_throughput",
        "goodput",
        "prefix_hit_rate",
        "preemptions",
        "kv_blocks",
        "kv_tokens",
    ):
        assert key in summary
    assert summary["num_completed"] == 60
    assert config["max_num_seqs"] == 16 and config["enable_prefix_caching"] is False
    assert config["max_num_batched_tokens"] == 8192


def test_sim_trtllm_synthetic_with_rate() -> None:
    result = CliRunner().invoke(
        app,
        [
            *BASE,
            "--engine",
            "trtllm",
            "--input-len",
            "512",
            "--output-len",
            "64",
            "--num-requests",
            "40",
            "--rate",
            "5",
            "--max_batch_size",
            "8",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["config"]["max_batch_size"] == 8
    assert data["config"]["scheduler_config.capacity_scheduler_policy"] == "GUARANTEED_NO_EVICT"


def test_sim_table_and_kv_log() -> None:
    result = CliRunner().invoke(app, [*BASE, "--workload", "azure-code", "--num-requests", "20"])
    assert result.exit_code == 0, result.output
    assert "GPU KV cache size" in result.output and "ttft" in result.output


def test_unknown_engine_flag_fails_like_argparse() -> None:
    result = CliRunner().invoke(app, [*BASE, "--workload", "azure-conv", "--max-num-seq", "4"])
    assert result.exit_code == 1
    assert "unrecognized arguments: --max-num-seq 4" in result.output


def test_invalid_config_fails_like_the_engine() -> None:
    result = CliRunner().invoke(
        app,
        [
            *BASE,
            "--workload",
            "azure-conv",
            "--no-enable-chunked-prefill",
            "--max-num-batched-tokens",
            "4096",
        ],
    )
    assert result.exit_code == 1
    assert "is smaller than max_model_len (131072)" in result.output


def test_list_catalogs_and_user_catalog(tmp_path: Path) -> None:
    models = CliRunner().invoke(app, ["sim", "--list-models", "--json"])
    assert models.exit_code == 0
    assert "qwen3-30b-a3b" in {m["id"] for m in json.loads(models.stdout)}
    catalog = tmp_path / "gpus.yaml"
    catalog.write_text(
        "gpus:\n  - id: test-accelerator-96g\n    name: Test Accelerator\n"
        "    bf16_tflops: 500\n    fp8_tflops: 1000\n    mem_gib: 96\n"
        "    mem_bw_gb_s: 4000\n    interconnect_bw_gb_s: 900\n    source: a test\n"
    )
    gpus = CliRunner().invoke(app, ["sim", "--catalog", str(catalog), "--list-gpus", "--json"])
    assert gpus.exit_code == 0, gpus.output
    ids = {g["id"] for g in json.loads(gpus.stdout)}
    assert {"h100-sxm", "test-accelerator-96g"} <= ids
    table = CliRunner().invoke(app, ["sim", "--list-gpus"])
    assert table.exit_code == 0 and "HBM" in table.output


def test_help_lists_engine_flags() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from ui.cli import main; main()", "sim", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    for flag in ("--max-num-seqs", "--enable-prefix-caching", "--max_batch_size", "--workload"):
        assert flag in result.stdout
