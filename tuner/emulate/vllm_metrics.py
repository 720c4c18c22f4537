"""vLLM V1's Prometheus metrics, fed by the emulated engine.

Names, types, help texts, labels (``model_name``, ``engine``) and bucket boundaries follow
``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``). ``vllm_version`` picks the release
whose families are served. Checked against real releases: 0.32.0 (the /metrics of a running
server, tests/data/vllm) and 0.33.0 (its wheel's ``loggers.py``, ``perf.py`` and
``config/cache.py``), which serve the same always-on families:

- besides the core gauges, counters and histograms: ``vllm:num_requests_waiting_by_reason``
  (gauge, ``reason`` capacity / deferred), ``vllm:prompt_tokens_by_source`` (counter, ``source``
  local_compute / local_cache_hit / external_kv_transfer), ``vllm:prompt_tokens_cached`` and
  ``vllm:prompt_tokens_cached_by_source`` (counters, ``source`` device / host / p2p / disk /
  external_unspecified), ``vllm:admission_rejections`` (counter, labels ``model_name`` and
  ``reason``), ``vllm:request_num_preemptions`` and ``vllm:request_prefill_kv_computed_tokens``
  (histograms);
- counters that stay at 0 here because what feeds them is off or absent:
  ``vllm:external_prefix_cache_queries`` / ``_hits`` (KV connector),
  ``vllm:mm_cache_queries`` / ``_hits`` (multimodal inputs) and
  ``vllm:estimated_flops_per_gpu`` / ``_read_bytes_per_gpu`` / ``_write_bytes_per_gpu``
  (created always, counted only with ``--enable-mfu-metrics``);
- ``finished_reason`` values stop / length / abort / error / repetition (the emulated engine
  ends requests by the first three only);
- ``vllm:cache_config_info`` labelled with every ``CacheConfig`` field (0.33 adds
  ``simple_cpu_offload_num_blocks``).

Releases before 0.32 were not checked against a real server. For them the registry keeps the
deprecated twins dashboards of that time scraped, ``vllm:gpu_cache_usage_perc`` (=
``vllm:kv_cache_usage_perc``), ``vllm:gpu_prefix_cache_queries`` / ``_hits`` (=
``vllm:prefix_cache_queries`` / ``_hits``) and ``vllm:time_per_output_token_seconds`` (the
same per-iteration observations as ``vllm:inter_token_latency_seconds``), without the
families above, and the older ``cache_config_info`` labels. Families vLLM serves only with an
option (LoRA, speculative decoding, KV transfer, KV block residency sampling, NaN checks,
watermarks) are not served.

Latencies are measured on the server's wall clock, so with ``--time-scale K`` they are K times
shorter than the emulated GPU's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from slotune.collector.engine_buckets import (
    VLLM_REQUEST_LATENCY_BUCKETS_S,
    VLLM_TOKEN_LATENCY_BUCKETS_S,
    VLLM_TTFT_BUCKETS_S,
)
from slotune.tuner.emulate.events import FinishedRequest, FinishReason, StepReport
from slotune.tuner.sim.flags import CURRENT_VLLM_VERSION, vllm_release

# The latency bounds are vLLM's release definitions, shared with the exported alert rules.
TTFT_BUCKETS_S = VLLM_TTFT_BUCKETS_S
TOKEN_LATENCY_BUCKETS_S = VLLM_TOKEN_LATENCY_BUCKETS_S
REQUEST_LATENCY_BUCKETS_S = VLLM_REQUEST_LATENCY_BUCKETS_S
_ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
_N_BUCKETS = (1, 2, 5, 10, 20)
_NUM_PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
_LABELS = ("model_name", "engine")
# Label values vLLM creates up front (v1/metrics/loggers.py, stats.py, cache_hit_source.py,
# v1/engine/__init__.py).
_FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
_WAITING_REASONS = ("capacity", "deferred")
_PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
_CACHE_HIT_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
_ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")
# The first release checked against a real server: it serves the families above and no longer
# the deprecated twins. 0.33 adds one CacheConfig field.
_V0_32 = (0, 32)
_V0_33 = (0, 33)


# Always-on counters whose sources the emulated engine does not have (help texts as in vLLM).
_ZERO_COUNTERS = (
    (
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector cross-instance cache sharing, in "
        "terms of number of queried tokens.",
    ),
    (
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector cross-instance cache sharing, in terms "
        "of number of cached tokens.",
    ),
    ("vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items."),
    ("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items."),
    (
        "vllm:estimated_flops_per_gpu",
        "Estimated number of floating point operations per GPU (for Model Flops Utilization "
        "calculations).",
    ),
    (
        "vllm:estimated_read_bytes_per_gpu",
        "Estimated number of bytes read from memory per GPU (for Model Flops Utilization "
        "calculations).",
    ),
    (
        "vllm:estimated_write_bytes_per_gpu",
        "Estimated number of bytes written to memory per GPU (for Model Flops Utilization "
        "calculations).",
    ),
)


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


@dataclass(frozen=True, slots=True)
class CacheConfigInfo:
    """What the emulated engine knows of vLLM's ``CacheConfig`` (``vllm:cache_config_info``)."""

    block_size: int
    cache_dtype: str
    enable_prefix_caching: bool
    gpu_memory_utilization: float
    num_gpu_blocks: int
    max_model_len: int


def cache_config_labels(info: CacheConfigInfo, vllm_version: str) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info``: ``str()`` of every ``CacheConfig`` field.

    Fields the emulated engine has no counterpart for carry vLLM's defaults on a GPU.
    """
    common = {
        "block_size": str(info.block_size),
        "cache_dtype": info.cache_dtype,
        "enable_prefix_caching": str(info.enable_prefix_caching),
        "gpu_memory_utilization": str(info.gpu_memory_utilization),
        "is_attention_free": "False",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(info.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_caching_hash_algo": "sha256",
        "sliding_window": "None",
    }
    release = vllm_release(vllm_version)[:2]
    if release < _V0_32:
        return {**common, "calculate_kv_scales": "False", "cpu_offload_gb": "0", "swap_space": "4"}
    kv_tokens = info.num_gpu_blocks * info.block_size
    labels = {
        **common,
        "_block_size_resolved": "True",
        "cache_hit_alignment_tokens": "None",
        "effective_attention_block_size": str(info.block_size),
        "enable_mamba_shared_prefix_checkpoint": "False",
        "hash_block_size": "None",
        "kv_cache_dtype_skip_layers": "[]",
        "kv_cache_layout": "None",
        "kv_cache_max_concurrency": str(kv_tokens / info.max_model_len),
        "kv_cache_memory_bytes": "None",
        "kv_cache_size_tokens": str(kv_tokens),
        "kv_offloading_backend": "native",
        "kv_offloading_size": "None",
        "kv_sharing_fast_prefill": "False",
        "mamba_block_size": "None",
        "mamba_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "mamba_page_size_padded": "None",
        "mamba_ssm_cache_dtype": "auto",
        "prefix_cache_retention_interval": "0",
        "prefix_match_unit": "None",
        "replayssm_buffer_len": "16",
        "skip_page_size_padded": "None",
        "swa_bounded_replay": "True",
        "use_kda_recoverssm": "False",
        "use_replayssm": "False",
        "user_specified_block_size": "False",
    }
    if release >= _V0_33:
        labels["simple_cpu_offload_num_blocks"] = "None"
    return dict(sorted(labels.items()))


class VllmMetrics:
    """A Prometheus registry with vLLM V1's metric families for one engine.

    Args:
        model_name: the served model name (label ``model_name``).
        max_model_len: bounds the token-count histogram buckets, as in vLLM.
        cache_config: labels of ``vllm:cache_config_info`` (vLLM's CacheConfig fields).
    """

    def __init__(
        self,
        model_name: str,
        max_model_len: int,
        cache_config: Mapping[str, str],
        *,
        vllm_version: str = CURRENT_VLLM_VERSION,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        values = (model_name, "0")
        reg = self.registry
        self.is_v0_32 = vllm_release(vllm_version)[:2] >= _V0_32

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
        self._deprecated_gauges: list[Gauge] = []
        self._deprecated_queries: list[Counter] = []
        self._deprecated_hits: list[Counter] = []
        self._deprecated_itl: list[Histogram] = []
        if not self.is_v0_32:
            self._deprecated_gauges.append(
                gauge(
                    "vllm:gpu_cache_usage_perc",
                    "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use "
                    "vllm:kv_cache_usage_perc instead.",
                )
            )
        self._prefix_queries = counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
        )
        self._prefix_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        if not self.is_v0_32:
            self._deprecated_queries.append(
                counter(
                    "vllm:gpu_prefix_cache_queries",
                    "GPU prefix cache queries, in terms of number of queriedtokens. "
                    "DEPRECATED: Use vllm:prefix_cache_queries instead.",
                )
            )
            self._deprecated_hits.append(
                counter(
                    "vllm:gpu_prefix_cache_hits",
                    "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: "
                    "Use vllm:prefix_cache_hits instead.",
                )
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
        reasons = _FINISHED_REASONS if self.is_v0_32 else tuple(r.value for r in FinishReason)
        labelled = {reason: success.labels(*values, reason) for reason in reasons}
        self._success = {r: labelled[r.value] for r in FinishReason}

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
        if not self.is_v0_32:
            self._deprecated_itl.append(
                histogram(
                    "vllm:time_per_output_token_seconds",
                    "Histogram of time per output token in seconds.DEPRECATED: Use "
                    "vllm:inter_token_latency_seconds instead.",
                    TOKEN_LATENCY_BUCKETS_S,
                )
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
        if self.is_v0_32:
            self._add_v0_32_families(values, token_buckets)
        info_labels = {**cache_config, "engine": "0"}
        Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            tuple(info_labels),
            registry=reg,
        ).labels(**info_labels).set(1)

    def _add_v0_32_families(self, values: tuple[str, str], token_buckets: list[int]) -> None:
        reg = self.registry
        for name, doc in _ZERO_COUNTERS:
            Counter(name, doc, _LABELS, registry=reg).labels(*values)
        waiting_by_reason = Gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
            "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA "
            "budget, KV transfer, blocked status). Sum of all reasons equals "
            "vllm:num_requests_waiting.",
            (*_LABELS, "reason"),
            registry=reg,
        )
        # Every waiting request of the simulated engine waits for capacity.
        self._waiting_capacity = waiting_by_reason.labels(*values, "capacity")
        waiting_by_reason.labels(*values, "deferred").set(0)
        by_source = Counter(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            (*_LABELS, "source"),
            registry=reg,
        )
        self._prompt_by_source = {s: by_source.labels(*values, s) for s in _PROMPT_SOURCES}
        self._prompt_cached = Counter(
            "vllm:prompt_tokens_cached",
            "Number of cached prompt tokens (local + external).",
            _LABELS,
            registry=reg,
        ).labels(*values)
        cached_by_source = Counter(
            "vllm:prompt_tokens_cached_by_source",
            "Prefix-cache hit tokens by the cache tier that supplied them: device (local "
            "HBM), host (offloaded to DRAM), disk, p2p (transferred from another vLLM "
            "instance) or external_unspecified. Counted at admission; sums to "
            "vllm:prefix_cache_hits + vllm:external_prefix_cache_hits.",
            (*_LABELS, "source"),
            registry=reg,
        )
        self._cached_on_device = cached_by_source.labels(*values, "device")
        for source in _CACHE_HIT_SOURCES[1:]:
            cached_by_source.labels(*values, source)
        rejections = Counter(
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            ("model_name", "reason"),
            registry=reg,
        )
        for reason in _ADMISSION_REASONS:
            rejections.labels(values[0], reason)
        self._req_preemptions = Histogram(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            _LABELS,
            registry=reg,
            buckets=_NUM_PREEMPTIONS_BUCKETS,
        ).labels(*values)
        self._req_prefill_computed = Histogram(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            _LABELS,
            registry=reg,
            buckets=token_buckets,
        ).labels(*values)

    def on_step(self, report: StepReport) -> None:
        """Record one scheduler step (gauges, token counters, TTFT and ITL)."""
        counters = report.counters
        self._running.set(counters.requests_running)
        self._waiting.set(counters.requests_waiting)
        self._kv_usage.set(counters.kv_usage)
        for deprecated in self._deprecated_gauges:
            deprecated.set(counters.kv_usage)
        for metric in (self._prefix_queries, *self._deprecated_queries):
            metric.inc(report.prefix_queries)
        for metric in (self._prefix_hits, *self._deprecated_hits):
            metric.inc(report.prefix_hits)
        if self.is_v0_32:
            self._waiting_capacity.set(counters.requests_waiting)
            self._prompt_by_source["local_compute"].inc(report.prompt_tokens)
            self._prompt_by_source["local_cache_hit"].inc(report.prefix_hits)
            self._prompt_cached.inc(report.prefix_hits)
            self._cached_on_device.inc(report.prefix_hits)
        self._preemptions.inc(report.preemptions)
        self._prompt_tokens.inc(report.prompt_tokens)
        self._generation_tokens.inc(report.generation_tokens)
        self._iteration_tokens.observe(report.prompt_tokens + report.generation_tokens)
        for ttft_s in report.ttfts_s:
            self._ttft.observe(ttft_s)
        for itl_s in report.itls_s:
            self._itl.observe(itl_s)
            for deprecated_itl in self._deprecated_itl:
                deprecated_itl.observe(itl_s)

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
        if self.is_v0_32:
            self._req_preemptions.observe(request.preemptions)
            self._req_prefill_computed.observe(request.prompt_tokens - request.cached_tokens)

    def render(self) -> bytes:
        """The Prometheus text exposition of the registry."""
        return generate_latest(self.registry)
