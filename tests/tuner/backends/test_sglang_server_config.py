"""Reading a running SGLang's configuration from its own routes."""

from __future__ import annotations

import json

from _sglang_server import SERVER_INFO, SglangServer, serving

from slotune.tuner.tune.backends.server_config import read_server_config

# The launch_server arguments slotune tunes, by SGLang's own names (server_args.py).
PARAM_NAMES = (
    "max_running_requests",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "mem_fraction_static",
    "schedule_policy",
    "schedule_conservativeness",
    "disable_radix_cache",
    "cuda_graph_max_bs",
    "page_size",
    "tp_size",
    "dp_size",
    "kv_cache_dtype",
    "context_length",
    "enable_mixed_chunk",
)


def test_the_server_arguments_sglang_resolved_are_read_from_server_info() -> None:
    with serving(SglangServer()) as server:
        config = read_server_config(server.url, PARAM_NAMES)
    assert config.version == "0.0.0.dev1+gf97c09dac"
    assert config.values == {
        "max_running_requests": 128,
        "chunked_prefill_size": 8192,
        "max_prefill_tokens": 16384,
        "mem_fraction_static": 0.907,
        "schedule_policy": "fcfs",
        "schedule_conservativeness": 1.0,
        "disable_radix_cache": False,
        "cuda_graph_max_bs": 4,
        "page_size": 1,
        "tp_size": 1,
        "dp_size": 1,
        "kv_cache_dtype": "auto",
        "context_length": None,  # the model's own: SGLang answers null
        "enable_mixed_chunk": False,
    }
    assert set(config.sources.values()) == {"/server_info"}
    assert config.unknown == ()
    assert config.figures == {
        "max_total_num_tokens": 20480,
        "max_req_input_len": 20474,
        "num_dp_ranks": 1,
        "effective_max_running_requests_per_dp": 128,
        "memory_usage": {"weight": 0.98, "kvcache": 0.23, "token_capacity": 20480, "graph": 0},
        "model_path": "qwen/qwen2.5-0.5b-instruct",
    }


def test_an_older_release_is_read_from_get_server_info() -> None:
    with serving(SglangServer(paths=("/get_server_info", "/get_model_info"))) as server:
        config = read_server_config(server.url, ("max_running_requests", "schedule_policy"))
    assert config.values == {"max_running_requests": 128, "schedule_policy": "fcfs"}
    assert config.sources == {
        "max_running_requests": "/get_server_info",
        "schedule_policy": "/get_server_info",
    }
    assert config.figures["model_path"] == "qwen/qwen2.5-0.5b-instruct"


def test_only_the_studys_parameters_and_figures_are_kept_never_the_api_key() -> None:
    info = {**SERVER_INFO, "api_key": "sk-not-to-be-stored", "admin_api_key": "sk-admin"}
    with serving(SglangServer(server_info=info)) as server:
        config = read_server_config(server.url, ("max_running_requests",))
    stored = json.dumps(config.to_dict())
    assert "sk-not-to-be-stored" not in stored and "sk-admin" not in stored
    assert set(config.values) == {"max_running_requests"}


def test_a_server_without_sglang_routes_leaves_the_parameters_unknown() -> None:
    with serving(SglangServer(paths=())) as server:
        config = read_server_config(server.url, ("max_running_requests", "chunked_prefill_size"))
    assert config.values == {}
    assert config.unknown == ("max_running_requests", "chunked_prefill_size")
    assert config.version is None
