"""/metrics in vLLM mode and /metrics + /prometheus/metrics in TensorRT-LLM mode."""

from __future__ import annotations

import httpx
from emulate_helpers import MAX_MODEL_LEN, MODEL, RunningEmulator
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from slotune.tuner.emulate.vllm_metrics import VllmMetrics, build_1_2_5_buckets

VLLM_FAMILIES = {
    # current V1 names
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:iteration_tokens_total": "histogram",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_inference_time_seconds": "histogram",
    "vllm:request_prompt_tokens": "histogram",
    "vllm:request_generation_tokens": "histogram",
    "vllm:request_params_max_tokens": "histogram",
    "vllm:request_params_n": "histogram",
    "vllm:request_max_num_generation_tokens": "histogram",
    "vllm:cache_config_info": "gauge",
    # always on since 0.32 (checked against a real 0.32 server; 0.33 is the default)
    "vllm:num_requests_waiting_by_reason": "gauge",
    "vllm:prompt_tokens_by_source": "counter",
    "vllm:prompt_tokens_cached": "counter",
    "vllm:prompt_tokens_cached_by_source": "counter",
    "vllm:admission_rejections": "counter",
    "vllm:request_num_preemptions": "histogram",
    "vllm:request_prefill_kv_computed_tokens": "histogram",
}
# Served before 0.32 only (deprecated twins real vLLM 0.32 no longer has).
VLLM_DEPRECATED_FAMILIES = {
    "vllm:gpu_cache_usage_perc": "gauge",
    "vllm:gpu_prefix_cache_queries": "counter",
    "vllm:gpu_prefix_cache_hits": "counter",
    "vllm:time_per_output_token_seconds": "histogram",
}


def _families(text: str) -> dict[str, tuple[str, list[Sample]]]:
    return {f.name: (f.type, f.samples) for f in text_string_to_metric_families(text)}


def _value(samples: list[Sample], name: str, **labels: str) -> float:
    matches = [
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(matches) == 1, (name, labels, matches)
    return matches[0]


def _run_requests(url: str, num: int, max_tokens: int) -> None:
    with httpx.Client(timeout=10) as client:
        for i in range(num):
            r = client.post(
                f"{url}/v1/completions",
                json={"prompt": f"request number {i}", "max_tokens": max_tokens},
            )
            assert r.status_code == 200


def test_vllm_metrics_parse_with_vllm_names_types_and_labels(
    vllm_emulator: RunningEmulator,
) -> None:
    _run_requests(vllm_emulator.url, 3, 4)
    r = httpx.get(f"{vllm_emulator.url}/metrics", timeout=10)
    assert r.headers["content-type"].startswith("text/plain")
    families = _families(r.text)
    for name, kind in VLLM_FAMILIES.items():
        assert name in families, name
        assert families[name][0] == kind, name
        for sample in families[name][1]:
            # vLLM's cache_config_info carries the CacheConfig fields, not the model name.
            if name != "vllm:cache_config_info":
                assert sample.labels["model_name"] == MODEL
            # vLLM labels admission rejections by model and reason only (frontend side).
            if name != "vllm:admission_rejections":
                assert sample.labels["engine"] == "0"
    assert not set(VLLM_DEPRECATED_FAMILIES) & set(families)
    _, preempted = families["vllm:request_num_preemptions"]
    assert _value(preempted, "vllm:request_num_preemptions_count") == 3
    _, computed = families["vllm:request_prefill_kv_computed_tokens"]
    assert _value(computed, "vllm:request_prefill_kv_computed_tokens_count") == 3
    _, by_reason = families["vllm:num_requests_waiting_by_reason"]
    assert _value(by_reason, "vllm:num_requests_waiting_by_reason", reason="deferred") == 0
    _, success = families["vllm:request_success"]
    assert _value(success, "vllm:request_success_total", finished_reason="length") == 3
    assert _value(success, "vllm:request_success_total", finished_reason="abort") == 0
    _, gen = families["vllm:generation_tokens"]
    assert _value(gen, "vllm:generation_tokens_total") == 12
    _, ttft = families["vllm:time_to_first_token_seconds"]
    assert _value(ttft, "vllm:time_to_first_token_seconds_count") == 3
    _, itl = families["vllm:inter_token_latency_seconds"]
    assert _value(itl, "vllm:inter_token_latency_seconds_count") == 9  # 3 gaps per request


def test_vllm_bucket_boundaries(vllm_emulator: RunningEmulator) -> None:
    families = _families(httpx.get(f"{vllm_emulator.url}/metrics", timeout=10).text)

    def bounds(name: str) -> list[float]:
        return [
            float(s.labels["le"])
            for s in families[name][1]
            if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"
        ]

    assert bounds("vllm:time_to_first_token_seconds") == [
        0.001,
        0.005,
        0.01,
        0.02,
        0.04,
        0.06,
        0.08,
        0.1,
        0.25,
        0.5,
        0.75,
        1.0,
        2.5,
        5.0,
        7.5,
        10.0,
        20.0,
        40.0,
        80.0,
        160.0,
        640.0,
        2560.0,
    ]
    assert bounds("vllm:inter_token_latency_seconds") == [
        0.01,
        0.025,
        0.05,
        0.075,
        0.1,
        0.15,
        0.2,
        0.3,
        0.4,
        0.5,
        0.75,
        1.0,
        2.5,
        5.0,
        7.5,
        10.0,
        20.0,
        40.0,
        80.0,
    ]
    assert bounds("vllm:e2e_request_latency_seconds") == [
        0.3,
        0.5,
        0.8,
        1.0,
        1.5,
        2.0,
        2.5,
        5.0,
        10.0,
        15.0,
        20.0,
        30.0,
        40.0,
        50.0,
        60.0,
        120.0,
        240.0,
        480.0,
        960.0,
        1920.0,
        7680.0,
    ]
    assert bounds("vllm:iteration_tokens_total") == [
        1,
        8,
        16,
        32,
        64,
        128,
        256,
        512,
        1024,
        2048,
        4096,
        8192,
        16384,
    ]
    assert bounds("vllm:request_prompt_tokens") == build_1_2_5_buckets(MAX_MODEL_LEN)
    assert build_1_2_5_buckets(100) == [1, 2, 5, 10, 20, 50, 100]


def test_trtllm_metrics_json_drains_on_get(trtllm_emulator: RunningEmulator) -> None:
    _run_requests(trtllm_emulator.url, 2, 3)
    first = httpx.get(f"{trtllm_emulator.url}/metrics", timeout=10).json()
    assert len(first) == 6  # the fake core runs each request alone: 3 iterations each
    stats = first[0]
    for key in (
        "iter",
        "iterLatencyMS",
        "numActiveRequests",
        "numQueuedRequests",
        "gpuMemUsage",
        "kvCacheStats",
        "inflightBatchingStats",
        "timestamp",
    ):
        assert key in stats, key
    kv = stats["kvCacheStats"]
    assert set(kv) >= {
        "maxNumBlocks",
        "freeNumBlocks",
        "usedNumBlocks",
        "tokensPerBlock",
        "allocTotalBlocks",
        "allocNewBlocks",
        "reusedBlocks",
        "missedBlocks",
        "cacheHitRate",
    }
    assert [s["iter"] for s in first] == sorted(s["iter"] for s in first)
    assert httpx.get(f"{trtllm_emulator.url}/metrics", timeout=10).json() == []


def test_trtllm_prometheus_families(trtllm_emulator: RunningEmulator) -> None:
    _run_requests(trtllm_emulator.url, 2, 3)
    families = _families(httpx.get(f"{trtllm_emulator.url}/prometheus/metrics", timeout=10).text)
    for name in (
        "trtllm_request_success",
        "trtllm_e2e_request_latency_seconds",
        "trtllm_time_to_first_token_seconds",
        "trtllm_time_per_output_token_seconds",
        "trtllm_request_queue_time_seconds",
        "trtllm_kv_cache_utilization",
        "trtllm_kv_cache_hit_rate",
        "trtllm_num_requests_running",
    ):
        assert name in families, name
        for sample in families[name][1]:
            assert sample.labels["model_name"] == MODEL
            assert sample.labels["engine_type"] == "trtllm"
    _, success = families["trtllm_request_success"]
    assert _value(success, "trtllm_request_success_total", finished_reason="length") == 2


def test_older_vllm_version_serves_the_deprecated_twins_instead() -> None:
    old = VllmMetrics(MODEL, MAX_MODEL_LEN, {}, vllm_version="0.15.1")
    families = _families(old.render().decode())
    for name, kind in VLLM_DEPRECATED_FAMILIES.items():
        assert families[name][0] == kind, name
    assert "vllm:prompt_tokens_cached" not in families
    current = _families(VllmMetrics(MODEL, MAX_MODEL_LEN, {}).render().decode())
    assert [
        float(s.labels["le"])
        for s in current["vllm:request_num_preemptions"][1]
        if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"
    ] == [1, 2, 3, 4, 5, 10, 20]
