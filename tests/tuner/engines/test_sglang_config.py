"""SGLang's arguments: defaults per GPU as SGLang computes them, validation, flags, KV pool."""

from __future__ import annotations

import pytest

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.tuner.engines.sglang import (
    SglangConfig,
    config_from_params,
    kv_capacity,
    launch_command,
    max_running_requests,
    parse_flags,
    resolve,
    schedule_of,
    to_argv,
)


@pytest.mark.parametrize(
    ("gpu", "tp", "chunk", "graph_bs", "mem_fraction"),
    [
        # 79.19 GiB = 81,090 MiB: 8192 / 256; reserved 512 + 12,288 + 512 + 128 = 13,440 MiB.
        ("h100-sxm", 1, 8192, 256, 0.834),
        # TP 4: graphs up to 512; reserved 512 + 12,288 + 1,024 + 512 = 14,336 MiB.
        ("h100-sxm", 4, 8192, 512, 0.823),
        ("h200", 1, 8192, 256, 0.906),
        ("b200", 1, 16384, 512, 0.856),
        # 39.39 GiB: 4096 / 32, reserved 512 + 6,144 + 64 + 128 = 6,848 MiB (no 10 GiB floor).
        ("a100-40gb", 1, 4096, 32, 0.830),
        ("l4", 1, 2048, 24, 0.833),
    ],
)
def test_memory_dependent_defaults_follow_sglang(
    gpu: str, tp: int, chunk: int, graph_bs: int, mem_fraction: float
) -> None:
    model = "llama-3.1-70b" if tp == 4 else "llama-3.1-8b"
    r = resolve(SglangConfig(model, gpu, tp_size=tp))
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs) == (chunk, graph_bs)
    assert r.mem_fraction_static == pytest.approx(mem_fraction)


def test_fixed_defaults() -> None:
    r = resolve(SglangConfig("llama-3.1-8b", "h100-sxm"))
    assert r.max_prefill_tokens == 16384
    assert r.schedule_policy == "fcfs"
    assert r.schedule_conservativeness == 1.0
    assert (r.page_size, r.tp_size, r.dp_size, r.kv_cache_dtype) == (1, 1, 1, "auto")
    assert r.context_length == 131072
    assert not r.disable_radix_cache and not r.enable_mixed_chunk
    assert r.max_running_requests == 2048  # half the pool, capped by the request slots


def test_chunking_off_reserves_for_max_prefill_tokens() -> None:
    r = resolve(SglangConfig("llama-3.1-8b", "h100-sxm", chunked_prefill_size=-1))
    assert r.chunked_prefill_size == -1
    # 512 + 16,384 x 1.5 + 512 + 128 = 25,728 MiB reserved.
    assert r.mem_fraction_static == pytest.approx(round((81090.56 - 25728) / 81090.56, 3))
    assert schedule_of(r, 64).chunked_prefill_size is None


def test_the_running_limit_is_derived_from_the_pool() -> None:
    # request slots: min(max(400_000 / 8192 x 512, 2048), 4096) = 4096; half the tokens: 200,000.
    assert max_running_requests(None, 8192, 400_000) == 4096
    assert max_running_requests(None, 8192, 3000) == 1500
    assert max_running_requests(64, 8192, 400_000) == 64
    assert max_running_requests(10_000, 131072, 400_000) == 2048


def test_kv_pool_is_the_static_fraction_less_the_weights() -> None:
    r = resolve(SglangConfig("llama-3.1-8b", "h100-sxm", mem_fraction_static=0.8))
    cap = kv_capacity(r)
    per_token = 2 * 32 * 8 * 128 * 2  # layers, KV heads, head dim, bf16
    expected = (int(r.gpu.mem_bytes * 0.8) - cap.weights_bytes - cap.non_torch_bytes) // per_token
    assert cap.kv_bytes_per_token == per_token
    assert expected - 16 < cap.num_tokens <= expected
    assert cap.block_size == 16
    fp8 = kv_capacity(resolve(SglangConfig("llama-3.1-8b", "h100-sxm", kv_cache_dtype="fp8_e4m3")))
    assert fp8.kv_bytes_per_token == per_token // 2


def test_a_pool_with_no_room_is_refused_with_sglang_words() -> None:
    # 0.5 x 22 GiB is less than the 15 GiB of weights: SGLang's start-up error.
    r = resolve(SglangConfig("llama-3.1-8b", "l4", mem_fraction_static=0.5))
    with pytest.raises(EngineConfigError, match="increase --mem-fraction-static"):
        kv_capacity(r)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"context_length": 1 << 20}, "greater than the derived context_length"),
        ({"schedule_policy": "nope"}, "invalid choice: 'nope'"),
        ({"mem_fraction_static": 1.2}, "--mem-fraction-static must be in"),
        ({"chunked_prefill_size": 1000, "page_size": 64}, "divisible by page_size"),
        ({"chunked_prefill_size": 0}, "positive or -1"),
        ({"tp_size": 3}, "must be divisible by tp size"),
        ({"kv_cache_dtype": "int4"}, "invalid choice: 'int4'"),
        ({"page_size": 0}, "--page-size must be at least 1"),
        ({"tp_size": 0}, "--tp-size must be at least 1"),
        ({"schedule_conservativeness": 0.0}, "positive number"),
    ],
)
def test_bad_arguments_are_refused(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(EngineConfigError, match=message):
        resolve(SglangConfig("llama-3.1-8b", "h100-sxm", **overrides))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"schedule_policy": "priority"}, "is not simulated"),
        ({"kv_cache_dtype": "nvfp4"}, "is not simulated"),
        ({"dp_size": 2}, "one data-parallel replica"),
    ],
)
def test_what_sglang_runs_but_the_simulator_does_not_is_refused_at_sizing(
    overrides: dict[str, object], message: str
) -> None:
    r = resolve(SglangConfig("llama-3.1-8b", "h100-sxm", **overrides))  # type: ignore[arg-type]
    with pytest.raises(EngineConfigError, match=message):
        kv_capacity(r)


def test_flags_round_trip() -> None:
    config = SglangConfig(
        "llama-3.1-8b",
        "h100-sxm",
        max_running_requests=128,
        chunked_prefill_size=-1,
        max_prefill_tokens=8192,
        mem_fraction_static=0.85,
        schedule_policy="lpm",
        schedule_conservativeness=0.5,
        disable_radix_cache=True,
        cuda_graph_max_bs=160,
        page_size=16,
        tp_size=1,
        kv_cache_dtype="fp8_e4m3",
        context_length=8192,
        enable_mixed_chunk=True,
    )
    argv = to_argv(config)
    assert "--disable-radix-cache" in argv and "--enable-mixed-chunk" in argv
    assert parse_flags(argv, model="llama-3.1-8b", gpu="h100-sxm") == config


def test_flags_take_sglang_aliases_and_refuse_unknown_ones() -> None:
    config = parse_flags(
        ["--model-path", "llama-3.1-8b", "--gpu", "h100-sxm", "--tensor-parallel-size", "2"]
    )
    assert config.tp_size == 2
    with pytest.raises(ConfigError, match="unrecognized arguments: --max-num-seqs"):
        parse_flags(["--max-num-seqs", "8"], model="llama-3.1-8b", gpu="h100-sxm")
    with pytest.raises(ConfigError, match="invalid choice"):
        parse_flags(["--schedule-policy", "sjf"], model="llama-3.1-8b", gpu="h100-sxm")


def test_params_take_aliases_and_refuse_other_engines_names() -> None:
    assert config_from_params("llama-3.1-8b", "h100-sxm", {"tensor_parallel_size": 2}).tp_size == 2
    with pytest.raises(ConfigError, match="'max_num_seqs' is not an sglang argument"):
        config_from_params("llama-3.1-8b", "h100-sxm", {"max_num_seqs": 8})


def test_launch_command_is_sglangs() -> None:
    config = SglangConfig(
        "llama-3.1-8b", "h100-sxm", max_running_requests=64, disable_radix_cache=True
    )
    argv = launch_command(config)
    assert argv[:5] == [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "meta-llama/Llama-3.1-8B-Instruct",
    ]
    assert argv[5:] == ["--enable-metrics", "--max-running-requests", "64", "--disable-radix-cache"]
