"""vLLM V1's Prometheus metrics, fed by the emulated engine.

Names, types, help texts, labels (``model_name``, ``engine``) and bucket boundaries follow
``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``). Besides the current names the
registry keeps the deprecated twins that dashboards still scrape: ``vllm:gpu_cache_usage_perc``
(= ``vllm:kv_cache_usage_perc``), ``vllm:gpu_prefix_cache_queries`` / ``_hits`` (=
``vllm:prefix_cache_queries`` / ``_hits``) and ``vllm:time_per_output_token_seconds`` (the same
per-iteration observations as ``vllm:inter_token_latency_seconds``).

Latencies are measured on the server's wall clock, so with ``--time-scale K`` they are K times
shorter than the emulated GPU's.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from slotune.tuner.sim.emulate.events import FinishedRequest, FinishReason, StepReport

TTFT_BUCKETS_S = (
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
TOKEN_LATENCY_BUCKETS_S = (
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
REQUEST_LATENCY_BUCKETS_S = (
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
_ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
_N_BUCKETS = (1, 2, 5, 10, 20)
_LABELS = ("model_name", "engine")


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value`` (vLLM's token-count buckets)."""
    buckets: list[int] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * scale
            if value > max_value:
                return buckets
            buckets.append(value)
        scale *= 10


class VllmMetrics:
    """A Prometheus registry with vLLM V1's metric families for one engine.

    Args:
        model_name: the served model name (label ``model_name``).
        max_model_len: bounds the token-count histogram buckets, as in vLLM.
        cache_config: labels of ``vllm:cache_config_info`` (vLLM's CacheConfig fields).
    """

    def __init__(
        self, model_name: str, max_model_len: int, cache_config: Mapping[str, str]
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        values = (model_name, "0")
        reg = self.registry

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, _LABELS, registry=reg).labels(*values)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, _LABELS, registry=reg).labels(*values)

        def histogram(name: str, doc: str, buckets: tuple[float, ...] | list[int]) -> Histogram:
            return Histogram(name, doc, _LABELS, registry=reg, buckets=buckets).labels(*values)

        self._running = gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches."
        )
        self._waiting = gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed."
        )
        sleep_state = Gauge(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
            "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep "
            "level 2.",
            (*_LABELS, "sleep_state"),
            registry=reg,
        )
        for state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            sleep_state.labels(*values, state).set(value)
        self._kv_usage = gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."
        )
        self._gpu_cache_usage = gauge(
            "vllm:gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use "
            "vllm:kv_cache_usage_perc instead.",
        )
        self._prefix_queries = counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
        )
        self._prefix_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        self._gpu_prefix_queries = counter(
            "vllm:gpu_prefix_cache_queries",
            "GPU prefix cache queries, in terms of number of queriedtokens. DEPRECATED: Use "
            "vllm:prefix_cache_queries instead.",
        )
        self._gpu_prefix_hits = counter(
            "vllm:gpu_prefix_cache_hits",
            "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use "
            "vllm:prefix_cache_hits instead.",
        )
        self._preemptions = counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        )
        self._prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self._generation_tokens = counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        )
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            (*_LABELS, "finished_reason"),
            registry=reg,
        )
        self._success = {r: success.labels(*values, r.value) for r in FinishReason}

        token_buckets = build_1_2_5_buckets(max_model_len)
        self._req_prompt_tokens = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
        )
        self._req_generation_tokens = histogram(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            token_buckets,
        )
        self._iteration_tokens = histogram(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            _ITERATION_TOKEN_BUCKETS,
        )
        self._max_generation_tokens = histogram(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            token_buckets,
        )
        self._params_n = histogram(
            "vllm:request_params_n", "Histogram of the n request parameter.", _N_BUCKETS
        )
        self._params_max_tokens = histogram(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            token_buckets,
        )
        self._ttft = histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS_S,
        )
        self._tpot_deprecated = histogram(
            "vllm:time_per_output_token_seconds",
            "Histogram of time per output token in seconds.DEPRECATED: Use "
            "vllm:inter_token_latency_seconds instead.",
            TOKEN_LATENCY_BUCKETS_S,
        )
        self._itl = histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            TOKEN_LATENCY_BUCKETS_S,
        )
        self._request_tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            TOKEN_LATENCY_BUCKETS_S,
        )
        self._e2e = histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS_S,
        )
        self._queue = histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS_S,
        )
        self._inference = histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            REQUEST_LATENCY_BUCKETS_S,
        )
        self._prefill = histogram(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            REQUEST_LATENCY_BUCKETS_S,
        )
        self._decode = histogram(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            REQUEST_LATENCY_BUCKETS_S,
        )
        info_labels = {**cache_config, "engine": "0"}
        Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            tuple(info_labels),
            registry=reg,
        ).labels(**info_labels).set(1)

    def on_step(self, report: StepReport) -> None:
        """Record one scheduler step (gauges, token counters, TTFT and ITL)."""
        counters = report.counters
        self._running.set(counters.requests_running)
        self._waiting.set(counters.requests_waiting)
        self._kv_usage.set(counters.kv_usage)
        self._gpu_cache_usage.set(counters.kv_usage)
        for metric in (self._prefix_queries, self._gpu_prefix_queries):
            metric.inc(report.prefix_queries)
        for metric in (self._prefix_hits, self._gpu_prefix_hits):
            metric.inc(report.prefix_hits)
        self._preemptions.inc(report.preemptions)
        self._prompt_tokens.inc(report.prompt_tokens)
        self._generation_tokens.inc(report.generation_tokens)
        self._iteration_tokens.observe(report.prompt_tokens + report.generation_tokens)
        for ttft_s in report.ttfts_s:
            self._ttft.observe(ttft_s)
        for itl_s in report.itls_s:
            self._itl.observe(itl_s)
            self._tpot_deprecated.observe(itl_s)

    def on_finished(self, request: FinishedRequest) -> None:
        """Record one finished (or aborted) request's latencies and sizes."""
        self._success[request.finish_reason].inc()
        self._e2e.observe(request.e2e_s)
        self._queue.observe(request.queue_s)
        self._prefill.observe(request.prefill_s)
        self._inference.observe(request.inference_s)
        self._decode.observe(request.decode_s)
        self._req_prompt_tokens.observe(request.prompt_tokens)
        self._req_generation_tokens.observe(request.completion_tokens)
        self._request_tpot.observe(request.mean_tpot_s)
        self._params_n.observe(1)
        self._params_max_tokens.observe(request.max_tokens)
        self._max_generation_tokens.observe(request.max_tokens)

    def render(self) -> bytes:
        """The Prometheus text exposition of the registry."""
        return generate_latest(self.registry)
