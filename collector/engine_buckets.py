"""The bucket bounds of each engine's latency histograms, as its release defines them.

A Prometheus rule can only count requests at a bound the histogram has: ``le="0.04"`` on a
histogram without that bucket matches no series, and the alert built on it never fires. So
exported rules snap an SLO threshold to one of these bounds (never to one seen in stored
data, which may come from another engine or an emulator), and the emulated engine serves
the same ones.

- vLLM V1 (``vllm/v1/metrics/loggers.py``, ``PrometheusStatLogger``; the same in every
  release slotune knows, 0.32 and 0.33 checked): ``vllm:time_to_first_token_seconds`` has
  :data:`VLLM_TTFT_BUCKETS_S`; ``vllm:inter_token_latency_seconds`` and
  ``vllm:request_time_per_output_token_seconds`` :data:`VLLM_TOKEN_LATENCY_BUCKETS_S`;
  ``vllm:e2e_request_latency_seconds`` and the queue / prefill / decode / inference time
  histograms :data:`VLLM_REQUEST_LATENCY_BUCKETS_S`.
- TensorRT-LLM (``tensorrt_llm/metrics/collector.py``) adapts vLLM's metrics and keeps
  these bounds.
- SGLang's bounds are a server option (``--bucket-time-to-first-token`` …), so no table can
  know them: rules for SGLang use the bounds the agent scraped.
"""

from __future__ import annotations

VLLM_TTFT_BUCKETS_S: tuple[float, ...] = (
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
)
VLLM_TOKEN_LATENCY_BUCKETS_S: tuple[float, ...] = (
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
)
VLLM_REQUEST_LATENCY_BUCKETS_S: tuple[float, ...] = (
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
)

_VLLM_LATENCIES: dict[str, tuple[float, ...]] = {
    "ttft": VLLM_TTFT_BUCKETS_S,
    "itl": VLLM_TOKEN_LATENCY_BUCKETS_S,
    "tpot": VLLM_TOKEN_LATENCY_BUCKETS_S,
    "e2e": VLLM_REQUEST_LATENCY_BUCKETS_S,
}
# engine -> canonical latency histogram -> finite bounds (s); engines absent here have none
ENGINE_BUCKETS_S: dict[str, dict[str, tuple[float, ...]]] = {
    "vllm": _VLLM_LATENCIES,
    "trtllm": {k: v for k, v in _VLLM_LATENCIES.items() if k != "itl"},
}


def engine_bounds(engine: str, family: str) -> tuple[float, ...] | None:
    """The finite bucket bounds (seconds) of ``engine``'s canonical ``family`` histogram, or
    None when the engine's release does not fix them (SGLang) or lacks the histogram."""
    return ENGINE_BUCKETS_S.get(engine, {}).get(family)
