"""vLLM's ``/metrics`` (V1 engine names, plus the older names still in production).

V1 labels every series with ``model_name`` and, for data-parallel deployments, ``engine``
(the engine index); both are kept. Renames handled, newest first:

- ``vllm:kv_cache_usage_perc`` (0..1) replaced ``vllm:gpu_cache_usage_perc`` (also 0..1,
  despite the name);
- ``vllm:prefix_cache_queries/hits`` replaced ``vllm:gpu_prefix_cache_queries/hits``
  (tokens, counters);
- ``vllm:inter_token_latency_seconds`` replaced ``vllm:time_per_output_token_seconds``, which
  always observed the gap between consecutive output tokens, i.e. ITL; the per-request TPOT
  is ``vllm:request_time_per_output_token_seconds``.

``vllm:iteration_tokens_total`` is a histogram despite its ``_total``: ``iteration_tokens``.
"""

from __future__ import annotations

from slotune.collector.agent.base import SourceKind
from slotune.collector.agent.canonical import RequestOutcomes, Rule
from slotune.collector.agent.promsource import PromTextSource

VLLM_RULES: tuple[Rule, ...] = (
    Rule("vllm:time_to_first_token_seconds", "ttft"),
    Rule("vllm:inter_token_latency_seconds", "itl"),
    Rule("vllm:time_per_output_token_seconds", "itl"),
    Rule("vllm:request_time_per_output_token_seconds", "tpot"),
    Rule("vllm:e2e_request_latency_seconds", "e2e"),
    Rule("vllm:request_queue_time_seconds", "queue_time"),
    Rule("vllm:request_prefill_time_seconds", "prefill_time"),
    Rule("vllm:request_decode_time_seconds", "decode_time"),
    Rule("vllm:num_requests_running", "requests_running"),
    Rule("vllm:num_requests_waiting", "requests_waiting"),
    Rule("vllm:kv_cache_usage_perc", "kv_usage"),
    Rule("vllm:gpu_cache_usage_perc", "kv_usage"),
    Rule("vllm:prefix_cache_queries_total", "prefix_queries"),
    Rule("vllm:gpu_prefix_cache_queries_total", "prefix_queries"),
    Rule("vllm:prefix_cache_hits_total", "prefix_hits"),
    Rule("vllm:gpu_prefix_cache_hits_total", "prefix_hits"),
    Rule("vllm:gpu_prefix_cache_hit_rate", "prefix_hit_rate"),
    Rule("vllm:num_preemptions_total", "preemptions"),
    Rule("vllm:prompt_tokens_total", "prompt_tokens"),
    Rule("vllm:generation_tokens_total", "generation_tokens"),
    Rule("vllm:request_success_total", "requests_finished"),
    Rule("vllm:iteration_tokens_total", "iteration_tokens"),
    Rule("vllm:request_prompt_tokens", "request_prompt_tokens"),
    Rule("vllm:request_generation_tokens", "request_generation_tokens"),
)


class VllmSource(PromTextSource):
    """vLLM's Prometheus endpoint."""

    kind = SourceKind.VLLM
    rules = VLLM_RULES
    outcomes = RequestOutcomes("vllm:request_success_total")
