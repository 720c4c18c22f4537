"""The SGLang adapter: registered, its export, its neutral view, its request checks."""

from __future__ import annotations

import shlex

import pytest

from slotune.collector.errors import EngineConfigError
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.engines.sglang import ADAPTER, SglangConfig, SglangScheduler
from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.config import Engine
from slotune.tuner.sim.request import RequestRejected, SimRequest
from slotune.tuner.sim.view import PrefixCache


def test_the_registry_serves_the_sglang_adapter() -> None:
    assert adapter_for("sglang") is ADAPTER
    assert ADAPTER.engine is Engine.SGLANG


def test_export_is_the_launch_server_command() -> None:
    config = ADAPTER.config_from_params(
        "llama-3.1-8b",
        "h100-sxm",
        {"max_running_requests": 256, "chunked_prefill_size": 2048, "enable_mixed_chunk": True},
    )
    text = ADAPTER.export(config)
    assert shlex.split(text) == [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--enable-metrics",
        "--max-running-requests",
        "256",
        "--chunked-prefill-size",
        "2048",
        "--enable-mixed-chunk",
    ]
    assert ADAPTER.parse_flags(shlex.split(text)[3:], gpu="h100-sxm") == SglangConfig(
        "meta-llama/Llama-3.1-8B-Instruct",
        "h100-sxm",
        max_running_requests=256,
        chunked_prefill_size=2048,
        enable_mixed_chunk=True,
    )


def test_the_default_running_limit_is_derived_from_the_pool() -> None:
    r = ADAPTER.resolve(SglangConfig("llama-3.1-8b", "h100-sxm"))
    # 415k tokens / 131,072 x 512 = 1,623 slots, raised to SGLang's 2,048 floor.
    assert r.to_dict()["max_running_requests"] == 2048
    assert ADAPTER.sim_view(r, ADAPTER.kv_capacity(r)).max_running == 2048


def test_a_model_too_big_for_one_gpu_resolves_and_fails_at_start() -> None:
    # A study resolves the defaults before it sets the tensor-parallel size.
    r = ADAPTER.resolve(SglangConfig("llama-3.1-70b", "h100-sxm"))
    assert r.max_running_requests is None
    with pytest.raises(EngineConfigError, match="Raise --tp-size"):
        ADAPTER.kv_capacity(r)
    assert ADAPTER.kv_capacity(
        ADAPTER.resolve(SglangConfig("llama-3.1-70b", "h100-sxm", tp_size=4))
    )


def test_sim_view_names_nothing_of_sglang() -> None:
    r = ADAPTER.resolve(SglangConfig("llama-3.1-8b", "h100-sxm", context_length=8192))
    cap = ADAPTER.kv_capacity(r)
    view = ADAPTER.sim_view(r, cap)
    assert view.max_running == 4096  # 415k / 8,192 x 512 capped at 4,096
    assert (view.token_budget, view.chunked_prefill) == (8192, True)
    assert view.prefix_cache is PrefixCache.RADIX
    assert (view.block_size, view.max_len, view.memory_fraction) == (16, 8192, 0.834)
    off = ADAPTER.resolve(
        SglangConfig("llama-3.1-8b", "h100-sxm", chunked_prefill_size=-1, disable_radix_cache=True)
    )
    off_view = ADAPTER.sim_view(off, ADAPTER.kv_capacity(off))
    assert (off_view.token_budget, off_view.chunked_prefill) == (16384, False)
    assert off_view.prefix_cache is PrefixCache.NONE


def test_the_scheduler_is_sglangs() -> None:
    r = ADAPTER.resolve(SglangConfig("llama-3.1-8b", "h100-sxm", schedule_policy="lpm"))
    cap = ADAPTER.kv_capacity(r)
    scheduler = ADAPTER.scheduler(
        r, ADAPTER.sim_view(r, cap), BlockManager(cap.num_blocks, 16, enable_caching=True)
    )
    assert isinstance(scheduler, SglangScheduler)
    assert scheduler.policy == "lpm"


def test_a_request_the_pool_can_never_hold_is_refused() -> None:
    r = ADAPTER.resolve(SglangConfig("llama-3.1-8b", "l4", mem_fraction_static=0.9))
    cap = ADAPTER.kv_capacity(r)
    ADAPTER.check_request(r, cap, SimRequest("ok", 0.0, 1000, 100))
    with pytest.raises(RequestRejected, match="longer than the model's context length"):
        ADAPTER.check_request(r, cap, SimRequest("long", 0.0, cap.num_tokens, 10))
    with pytest.raises(RequestRejected, match="lower max_tokens"):
        ADAPTER.check_request(r, cap, SimRequest("big", 0.0, cap.num_tokens - 100, 1000))


def test_kv_log_line_is_sglangs() -> None:
    r = ADAPTER.resolve(SglangConfig("llama-3.1-8b", "h100-sxm"))
    cap = ADAPTER.kv_capacity(r)
    (line,) = ADAPTER.kv_log_lines(cap, r.context_length)
    assert line.startswith(f"KV Cache is allocated. #tokens: {cap.num_tokens}, K size: ")
