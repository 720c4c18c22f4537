"""Engine flags by the engines' own spellings, and back into launch commands."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from slotune.collector.errors import ConfigError
from slotune.tuner.sim.config import TrtllmConfig, VllmConfig
from slotune.tuner.sim.flags import (
    extra_llm_api_options,
    launch_command,
    parse_engine_flags,
    to_argv,
)

TARGET = {"model": "llama-3.1-8b", "gpu": "h100-sxm"}


def test_vllm_flags_in_every_spelling() -> None:
    c = parse_engine_flags(
        [
            "--max-num-seqs",
            "64",
            "--max_num_batched_tokens=2048",
            "-tp",
            "2",
            "--no-enable-prefix-caching",
            "--enable-chunked-prefill",
            "--max-model-len",
            "32k",
            "--kv-cache-dtype",
            "fp8",
            "--enforce-eager",
            "--scheduling-policy=priority",
            "--long-prefill-token-threshold",
            "512",
            "--gpu-memory-utilization",
            "0.85",
        ],
        **TARGET,
    )
    assert c == VllmConfig(
        **TARGET,
        max_num_seqs=64,
        max_num_batched_tokens=2048,
        tensor_parallel_size=2,
        enable_prefix_caching=False,
        enable_chunked_prefill=True,
        max_model_len=32000,
        kv_cache_dtype="fp8",
        enforce_eager=True,
        scheduling_policy="priority",
        long_prefill_token_threshold=512,
        gpu_memory_utilization=0.85,
    )


def test_vllm_model_positional_or_flag() -> None:
    assert parse_engine_flags(["llama-3.1-8b", "--gpu", "h100-sxm"]).model == "llama-3.1-8b"
    assert parse_engine_flags(["--model", "qwen3-8b"], gpu="l4").model == "qwen3-8b"


def test_unknown_vllm_flag_is_worded_like_argparse() -> None:
    with pytest.raises(ConfigError, match=r"^unrecognized arguments: --max-num-seq 4$"):
        parse_engine_flags(["--max-num-seq", "4"], **TARGET)


def test_bad_value_names_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"argument --max-num-seqs: invalid int value: 'x'"):
        parse_engine_flags(["--max-num-seqs", "x"], **TARGET)
    with pytest.raises(ConfigError, match="invalid choice"):
        parse_engine_flags(["--block-size", "12"], **TARGET)


def test_missing_model_or_gpu() -> None:
    with pytest.raises(ConfigError, match="--model"):
        parse_engine_flags([], gpu="h100-sxm")
    with pytest.raises(ConfigError, match="--gpu"):
        parse_engine_flags([], model="llama-3.1-8b")


def test_trtllm_flags_and_extra_options(tmp_path: Path) -> None:
    options = tmp_path / "extra.yaml"
    options.write_text(
        yaml.safe_dump(
            {
                "enable_chunked_prefill": True,
                "kv_cache_config": {
                    "enable_block_reuse": False,
                    "tokens_per_block": 64,
                    "free_gpu_memory_fraction": 0.8,
                },
                "scheduler_config": {"capacity_scheduler_policy": "MAX_UTILIZATION"},
            }
        )
    )
    c = parse_engine_flags(
        [
            "--max_batch_size",
            "128",
            "--max_num_tokens=4096",
            "--tp_size",
            "2",
            "--extra_llm_api_options",
            str(options),
        ],
        engine="trtllm",
        **TARGET,
    )
    assert c == TrtllmConfig(
        **TARGET,
        max_batch_size=128,
        max_num_tokens=4096,
        tensor_parallel_size=2,
        enable_chunked_prefill=True,
        enable_block_reuse=False,
        tokens_per_block=64,
        free_gpu_memory_fraction=0.8,
        capacity_scheduler_policy="MAX_UTILIZATION",
    )


def test_trtllm_unknown_option_and_yaml_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such option: --max-num-seqs"):
        parse_engine_flags(["--max-num-seqs", "4"], engine="trtllm", **TARGET)
    options = tmp_path / "extra.yaml"
    options.write_text("kv_cache_config:\n  host_cache_size: 4\n")
    with pytest.raises(ConfigError, match=r"kv_cache_config\.host_cache_size: Extra inputs"):
        parse_engine_flags(["--extra_llm_api_options", str(options)], engine="trtllm", **TARGET)


@pytest.mark.parametrize(
    "config",
    [
        VllmConfig(
            **TARGET,
            max_num_seqs=32,
            enable_prefix_caching=False,
            block_size=32,
            enforce_eager=True,
            max_model_len=8192,
            tensor_parallel_size=2,
        ),
        VllmConfig(**TARGET),
    ],
)
def test_vllm_argv_round_trips(config: VllmConfig) -> None:
    assert parse_engine_flags(to_argv(config), **TARGET) == config


def test_trtllm_argv_round_trips_through_the_options_file(tmp_path: Path) -> None:
    config = TrtllmConfig(
        **TARGET,
        max_batch_size=64,
        enable_block_reuse=False,
        capacity_scheduler_policy="MAX_UTILIZATION",
    )
    path = tmp_path / "extra_llm_api_options.yaml"
    path.write_text(yaml.safe_dump(extra_llm_api_options(config)))
    argv = to_argv(config, extra_options_path=str(path))
    assert parse_engine_flags(argv, engine="trtllm", **TARGET) == config
    with pytest.raises(ConfigError, match="extra_options_path"):
        to_argv(config)


def test_launch_command_names_the_hugging_face_model() -> None:
    argv = launch_command(VllmConfig(**TARGET, max_num_seqs=64))
    assert argv[:2] == ["vllm", "serve"]
    assert "/" in argv[2]
    assert argv[3:] == ["--max-num-seqs", "64"]
    assert launch_command(TrtllmConfig(**TARGET, max_num_tokens=2048))[0] == "trtllm-serve"
