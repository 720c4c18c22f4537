"""Engine configs: the engines' defaults per GPU, and refusals worded like the engines."""

from __future__ import annotations

import pytest

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.tuner.sim.config import (
    ResolvedTrtllm,
    ResolvedVllm,
    TrtllmConfig,
    VllmConfig,
    config_from_params,
    resolve,
)


def _vllm(**kwargs: object) -> ResolvedVllm:
    gpu = str(kwargs.pop("gpu", "h100-sxm"))
    resolved = resolve(VllmConfig(model="llama-3.1-8b", gpu=gpu, **kwargs))  # type: ignore[arg-type]
    assert isinstance(resolved, ResolvedVllm)
    return resolved


@pytest.mark.parametrize(
    ("gpu", "budget", "seqs"),
    [
        ("h100-sxm", 8192, 1024),  # >= 70 GiB and not an A100: vLLM's larger defaults
        ("h200", 8192, 1024),
        ("a100-80gb", 2048, 256),  # A100s are excluded on purpose in vLLM
        ("l4", 2048, 256),
    ],
)
def test_vllm_batch_defaults_depend_on_the_gpu(gpu: str, budget: int, seqs: int) -> None:
    r = _vllm(gpu=gpu)
    assert (r.max_num_batched_tokens, r.max_num_seqs) == (budget, seqs)


def test_vllm_v1_defaults() -> None:
    r = _vllm()
    assert r.enable_chunked_prefill and r.enable_prefix_caching
    assert (r.block_size, r.gpu_memory_utilization, r.tensor_parallel_size) == (16, 0.9, 1)
    assert r.max_model_len == 131072
    assert (r.scheduling_policy, r.kv_cache_dtype) == ("fcfs", "auto")
    assert r.served_model_name == r.model.hf_name


def test_chunked_prefill_off_defaults_budget_to_max_model_len() -> None:
    r = _vllm(enable_chunked_prefill=False, max_model_len=16384)
    assert r.max_num_batched_tokens == 16384


def test_partial_prefills_default_threshold_is_four_percent_of_max_model_len() -> None:
    r = _vllm(max_num_partial_prefills=4, max_model_len=10000)
    assert r.long_prefill_token_threshold == 400


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {
                "enable_chunked_prefill": False,
                "max_num_batched_tokens": 2048,
                "max_model_len": 8192,
            },
            r"max_num_batched_tokens \(2048\) is smaller than max_model_len \(8192\)\. This "
            r"effectively limits the maximum sequence length",
        ),
        (
            {"max_num_batched_tokens": 64, "max_num_seqs": 128},
            r"max_num_batched_tokens \(64\) must be greater than or equal to max_num_seqs \(128\)",
        ),
        (
            {
                "max_num_partial_prefills": 2,
                "enable_chunked_prefill": False,
                "max_num_batched_tokens": 200000,
            },
            "Chunked prefill must be enabled to set max_num_partial_prefills > 1",
        ),
        (
            {"max_num_partial_prefills": 2, "max_long_partial_prefills": 3},
            r"max_long_partial_prefills \(3\) must be greater than or equal to 1 and less than",
        ),
        ({"max_model_len": 200000}, r"User-specified max_model_len \(200000\) is greater than"),
        (
            {"tensor_parallel_size": 3},
            r"Total number of attention heads \(32\) must be divisible by tensor parallel size \(3\)",
        ),
        ({"block_size": 12}, "invalid choice: 12"),
        ({"gpu_memory_utilization": 1.5}, "GPU memory utilization"),
    ],
)
def test_vllm_refuses_like_vllm(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(EngineConfigError, match=message):
        _vllm(**kwargs)


def test_trtllm_defaults() -> None:
    r = resolve(TrtllmConfig(model="llama-3.1-8b", gpu="h100-sxm"))
    assert isinstance(r, ResolvedTrtllm)
    assert (r.max_batch_size, r.max_num_tokens, r.tokens_per_block) == (2048, 8192, 32)
    assert not r.enable_chunked_prefill and r.enable_block_reuse
    assert r.capacity_scheduler_policy == "GUARANTEED_NO_EVICT"
    assert r.to_dict()["kv_cache_config.free_gpu_memory_fraction"] == 0.9


def test_trtllm_refuses_unknown_policy() -> None:
    with pytest.raises(EngineConfigError, match="capacity_scheduler_policy"):
        resolve(
            TrtllmConfig(
                model="llama-3.1-8b", gpu="h100-sxm", capacity_scheduler_policy="FIRST_COME"
            )
        )


def test_config_from_params_uses_the_engines_names() -> None:
    c = config_from_params(
        "trtllm",
        "llama-3.1-8b",
        "h100-sxm",
        {"kv_cache_config.enable_block_reuse": False, "max_batch_size": 64},
    )
    assert c == TrtllmConfig(
        model="llama-3.1-8b", gpu="h100-sxm", enable_block_reuse=False, max_batch_size=64
    )
    with pytest.raises(ConfigError, match="'max_batch_size' is not a vllm parameter"):
        config_from_params("vllm", "llama-3.1-8b", "h100-sxm", {"max_batch_size": 64})


def test_unknown_gpu_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        resolve(VllmConfig(model="llama-3.1-8b", gpu="tpu-v9"))
