from __future__ import annotations

import pytest

from slotune.collector.errors import EngineConfigError
from slotune.collector.workload.synthetic import parse_length_spec, synthetic_trace
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.sim import simulate
from slotune.tuner.sim.catalog import get_gpu, get_model
from slotune.tuner.sim.config import config_from_params
from slotune.tuner.sim.memory import (
    MIN_REQUESTS_IN_KV,
    KvBudget,
    KvCapacity,
    kv_bytes_per_token,
    kv_capacity,
    kv_room_warning,
)

GIB = 1024**3
H100 = get_gpu("h100-sxm")
RTX_4090 = get_gpu("rtx-4090")
LLAMA_8B = get_model("llama-3.1-8b")
TOTAL = KvBudget.SHARE_OF_TOTAL  # vLLM's rule
FREE = KvBudget.SHARE_OF_FREE  # TensorRT-LLM's


def kv_log(cap: KvCapacity, max_model_len: int | None = None) -> list[str]:
    return adapter_for(cap.engine).kv_log_lines(cap, max_model_len or cap.max_model_len)


def test_llama_8b_on_h100_matches_hand_computation():
    cap = kv_capacity(LLAMA_8B, H100, gpu_memory_utilization=0.9, budget=TOTAL)
    total = int(79.19 * GIB)
    weights = 8_030_261_248 * 2
    # 8,192 batched tokens x 2 bytes x (3 x 14,336 MLP + 6,144 QKV + 4 x 4,096 hidden)
    # + 256 sequences x 128,256 vocab x 4 bytes x 2 logit copies
    activation = 8192 * 2 * (3 * 14336 + 6144 + 4 * 4096) + 256 * 128256 * 4 * 2
    non_torch = int(0.35 * GIB)
    cuda_graphs = int(0.2 * GIB) + 32 * int(0.01 * GIB)
    available = int(total * 0.9) - weights - activation - non_torch - cuda_graphs
    per_token = 2 * 32 * 8 * 128 * 2
    assert per_token == 131_072
    assert cap.kv_bytes_per_token == per_token
    assert cap.weights_bytes == weights
    assert cap.activation_bytes == activation
    assert cap.non_torch_bytes == non_torch
    assert cap.cuda_graph_bytes == cuda_graphs
    assert cap.available_kv_bytes == available
    assert cap.num_blocks == available // (16 * per_token) == 27_749
    assert cap.num_tokens == 27_749 * 16 == 443_984
    assert cap.max_model_len == 131_072
    assert cap.max_concurrency == pytest.approx(443_984 / 131_072)
    assert kv_log(cap) == [
        "Estimated CUDA graph memory: 0.52 GiB total",
        "Available KV cache memory: 54.20 GiB",
        "GPU KV cache size: 443,984 tokens",
        "Maximum concurrency for 131,072 tokens per request: 3.39x",
    ]
    assert kv_log(cap, 8192)[-1] == "Maximum concurrency for 8,192 tokens per request: 54.20x"


def test_kv_bytes_per_token():
    assert kv_bytes_per_token(get_model("llama-2-7b")) == 2 * 32 * 32 * 128 * 2
    assert kv_bytes_per_token(LLAMA_8B, 2) == 2 * 32 * 4 * 128 * 2
    assert kv_bytes_per_token(LLAMA_8B, 1, "fp8") == 2 * 32 * 8 * 128
    # Qwen2.5-7B has 4 KV heads: at TP 8 each rank keeps one (replicated), not half of one.
    assert kv_bytes_per_token(get_model("qwen2.5-7b"), 4) == 2 * 28 * 1 * 128 * 2


def test_more_memory_more_blocks():
    base = kv_capacity(LLAMA_8B, H100, budget=TOTAL)
    assert (
        kv_capacity(LLAMA_8B, H100, gpu_memory_utilization=0.95, budget=TOTAL).num_blocks
        > base.num_blocks
    )
    fp8 = kv_capacity(LLAMA_8B, H100, kv_cache_dtype="fp8", budget=TOTAL)
    assert fp8.num_tokens == pytest.approx(2 * base.num_tokens, abs=16)
    tp2 = kv_capacity(LLAMA_8B, H100, tensor_parallel_size=2, budget=TOTAL)
    assert tp2.weights_bytes == base.weights_bytes // 2
    assert tp2.num_tokens > 2 * base.num_tokens
    eager = kv_capacity(LLAMA_8B, H100, enforce_eager=True, budget=TOTAL)
    assert eager.cuda_graph_bytes == 0 and eager.num_blocks > base.num_blocks
    big_batch = kv_capacity(LLAMA_8B, H100, max_num_batched_tokens=32768, budget=TOTAL)
    assert big_batch.activation_bytes > base.activation_bytes
    assert big_batch.num_blocks < base.num_blocks
    blocks_32 = kv_capacity(LLAMA_8B, H100, block_size=32, budget=TOTAL)
    assert blocks_32.num_blocks == base.available_kv_bytes // (32 * 131_072)


def test_trtllm_uses_a_fraction_of_free_memory():
    cap = kv_capacity(
        LLAMA_8B, H100, engine="trtllm", free_gpu_memory_fraction=0.9, block_size=32, budget=FREE
    )
    free = (
        H100.mem_bytes
        - cap.weights_bytes
        - cap.activation_bytes
        - cap.non_torch_bytes
        - cap.cuda_graph_bytes
    )
    assert cap.available_kv_bytes == int(free * 0.9)
    assert cap.num_blocks == int(free * 0.9) // (32 * 131_072)
    allocated_gib = cap.num_blocks * 32 * 131_072 / GIB
    assert kv_log(cap) == [
        "[TensorRT-LLM][INFO] Number of tokens per block: 32.",
        f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {allocated_gib:.2f} GiB "
        f"for max tokens in paged KV cache ({cap.num_tokens}).",
    ]
    smaller = kv_capacity(
        LLAMA_8B, H100, engine="trtllm", free_gpu_memory_fraction=0.5, budget=FREE
    )
    assert smaller.num_tokens < cap.num_tokens


def test_moe_model_weights_count_every_expert():
    cap = kv_capacity(
        get_model("mixtral-8x7b"), H100, tensor_parallel_size=2, max_model_len=32768, budget=TOTAL
    )
    assert cap.weights_bytes == 46_702_792_704 * 2 // 2
    assert cap.num_blocks > 0


def test_70b_on_one_24gb_gpu_fails_like_vllm():
    with pytest.raises(
        EngineConfigError,
        match=r"CUDA out of memory while loading the model "
        r"weights: llama-3.1-70b needs 131.42 GiB .* total capacity of 23.64 GiB",
    ):
        kv_capacity(get_model("llama-3.1-70b"), RTX_4090, budget=TOTAL)


def test_no_room_for_cache_blocks_fails_like_vllm():
    # 14.96 GiB of weights fit the 23.64 GiB card but not a 0.6 x 23.64 = 14.18 GiB budget.
    with pytest.raises(
        EngineConfigError,
        match=r"^No available memory for the cache blocks\. "
        r"Try increasing `gpu_memory_utilization` when initializing the engine\.$",
    ):
        kv_capacity(LLAMA_8B, RTX_4090, gpu_memory_utilization=0.6, budget=TOTAL)


def test_max_model_len_that_does_not_fit_fails_like_vllm():
    with pytest.raises(EngineConfigError) as info:
        kv_capacity(LLAMA_8B, RTX_4090, gpu_memory_utilization=0.9, budget=TOTAL)
    message = str(info.value)
    assert message.startswith(
        "To serve at least one request with the models's max seq len (131072), (16.00 GiB KV "
        "cache is needed, which is larger than the available KV cache memory ("
    )
    assert "Based on the available memory, the estimated maximum model length is " in message
    assert message.endswith(
        "Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine."
    )
    fits = kv_capacity(
        LLAMA_8B, RTX_4090, gpu_memory_utilization=0.9, max_model_len=8192, budget=TOTAL
    )
    estimated = int(message.split("maximum model length is ")[1].split(".")[0])
    assert estimated == fits.num_tokens


def test_other_invalid_configurations():
    with pytest.raises(EngineConfigError, match=r"max_model_len \(200000\) is greater than"):
        kv_capacity(LLAMA_8B, H100, max_model_len=200_000, budget=TOTAL)
    with pytest.raises(EngineConfigError, match=r"must be within \(0, 1\]"):
        kv_capacity(LLAMA_8B, H100, gpu_memory_utilization=1.5, budget=TOTAL)
    with pytest.raises(EngineConfigError, match="must be divisible by tensor parallel size"):
        kv_capacity(get_model("qwen2.5-7b"), H100, tensor_parallel_size=3, budget=TOTAL)
    with pytest.raises(EngineConfigError, match="Not enough GPU memory left for the KV cache"):
        kv_capacity(LLAMA_8B, RTX_4090, engine="trtllm", max_num_batched_tokens=65536, budget=FREE)


def test_a_kv_cache_with_room_for_only_a_few_requests_is_warned_about():
    # a huge token budget eats the memory the cache would get: 7,200 tokens are left
    tiny = kv_capacity(
        LLAMA_8B,
        H100,
        engine="trtllm",
        block_size=32,
        max_num_seqs=2048,
        max_num_batched_tokens=495_000,
        budget=FREE,
    )
    assert tiny.num_tokens == 7_200
    knobs = adapter_for("trtllm").kv_room_knobs
    warning = kv_room_warning(tiny, 2_500, "the workload's mean", knobs)
    assert warning is not None
    assert "holds only 7,200 tokens: room for 2.9 requests of 2,500 tokens" in warning
    assert "lower max_num_tokens" in warning
    assert kv_room_warning(tiny, 7_200 / MIN_REQUESTS_IN_KV, "x", knobs) is None
    roomy = kv_capacity(LLAMA_8B, H100, gpu_memory_utilization=0.9, budget=TOTAL)
    assert kv_room_warning(roomy, 200_000, "x", "knobs") is not None  # 2.2 requests fit
    assert kv_room_warning(roomy, 100_000, "x", "knobs") is None  # 4.4 fit


def test_the_simulator_warns_against_its_workload():
    config = config_from_params("trtllm", "llama-3.1-8b", "h100-sxm", {"max_num_tokens": 495_000})
    result = simulate(
        config, synthetic_trace(parse_length_spec("2000"), parse_length_spec("500"), 4)
    )
    assert result.kv_log[-1].startswith("WARNING The KV cache holds only 7,200 tokens")
    assert "2,500 tokens (this workload's mean prompt + output)" in result.kv_log[-1]
    assert result.summary.engine.kv_warning == result.kv_log[-1].removeprefix("WARNING ")
