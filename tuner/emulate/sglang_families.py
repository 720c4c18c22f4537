"""SGLang's ``/metrics`` families: one row per family, as SGLang 0.5.23 defines and exports them.

Read from ``sglang/srt/observability/metrics_collector.py`` (``SchedulerMetricsCollector``,
``TokenizerMetricsCollector``), ``func_timer.py``, ``http_request_metrics.py`` and
``cpu_monitor.py`` of that release, and checked against the exposition those collectors give
for a default single-GPU server (tests/data/sglang). SGLang serves ``/metrics`` from
prometheus_client's multiprocess collector, so a family appears once one of its series exists;
:attr:`Family.initial` lists the series a default server has from its first scrape on (the
label values besides the scope's labels).

Scopes: the scheduler labels its families ``model_name``, ``engine_type``, ``tp_rank``,
``pp_rank``, ``moe_ep_rank``; the tokenizer manager ``model_name`` and ``engine_type``; the
HTTP, function-timer and CPU families carry only their own labels. The two scheduler gauges
SGLang creates without a multiprocess mode carry the process's ``pid`` as well, as
prometheus_client's multiprocess collector adds it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


class Scope(Enum):
    """Which SGLang component owns a family, and so which labels it carries."""

    SCHEDULER = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
    TOKENIZER = ("model_name", "engine_type")
    NONE = ()


GAUGE, COUNTER, HISTOGRAM = Kind.GAUGE, Kind.COUNTER, Kind.HISTOGRAM
SCHEDULER, TOKENIZER, NONE = Scope.SCHEDULER, Scope.TOKENIZER, Scope.NONE

# Bucket bounds of the release's defaults (none of them depends on the model).
TTFT_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS_S = (*TTFT_BUCKETS_S, 600, 1200, 1800, 2400)
ITL_BUCKETS_S = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
)
TOKEN_COUNT_BUCKETS = (
    100,
    300,
    500,
    700,
    1000,
    1500,
    2000,
    3000,
    4000,
    5000,
    6000,
    7000,
    8000,
    9000,
    10000,
    12500,
    15000,
    17500,
    20000,
    22500,
    25000,
    27500,
    30000,
    35000,
    40000,
    60000,
    80000,
    100000,
    200000,
    300000,
    400000,
    600000,
    800000,
    1000000,
    1100000,
)
QUEUE_BUCKETS_S = (
    0.0,
    0.001,
    0.005,
    0.01,
    0.05,
    0.1,
    0.2,
    0.5,
    1,
    2,
    3,
    4,
    5,
    10,
    15,
    20,
    30,
    40,
    50,
    60,
    70,
    80,
    90,
    100,
    200,
    300,
    400,
    500,
    600,
    700,
    800,
    900,
    1000,
    1200,
    1400,
    1600,
    1800,
    2000,
    2500,
    3000,
)
DP_IMBALANCE_BUCKETS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0)
DP_SYNC_WAIT_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)


def exponential_buckets(start: float, width: float, length: int) -> tuple[float, ...]:
    """SGLang's ``observability.utils.exponential_buckets``: start, start x width, ..."""
    return tuple(start * width**i for i in range(length))


PER_STAGE_BUCKETS_S = exponential_buckets(0.001, 1.62, 30)
FUNC_LATENCY_BUCKETS_S = exponential_buckets(0.05, 1.5, 18)
# SGLang's GaugeHistogram: one gauge series per (gt, le] range of routing-key counts.
ROUTING_KEY_RANGES = tuple(
    itertools.pairwise(("0", "1", "2", "3", "5", "7", "10", "20", "50", "100", "200", "+Inf"))
)
GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode")
STARTUP_PHASES = ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e")
SCHEDULER_STAGES = (
    "other",
    "recv_requests",
    "process_input_requests",
    "get_next_batch_to_run",
    "process_queue",
    "run_batch",
    "process_batch_result",
    "sanity_check_cache",
    "idle",
)
STREAMING = ("false", "true")


@dataclass(frozen=True, slots=True)
class Family:
    """One SGLang metric family.

    Attributes:
        name: the name given to prometheus_client (counters end in ``_total``).
        kind: gauge, counter or histogram.
        scope: whose labels it carries.
        labels: its own labels, after the scope's.
        doc: SGLang's help text.
        buckets: histogram bounds (without +Inf).
        initial: label-value tuples of ``labels`` whose series exist from the start;
            ``((),)`` for one unlabelled series, ``()`` for a family that appears only once
            something happens (a request, a retraction, an abort).
        per_process: SGLang made it without a multiprocess mode, so its series carry the
            writing process's ``pid`` as a last label.
    """

    name: str
    kind: Kind
    scope: Scope
    labels: tuple[str, ...]
    doc: str
    buckets: tuple[float, ...] = ()
    initial: tuple[tuple[str, ...], ...] = ((),)
    per_process: bool = False


FAMILIES: tuple[Family, ...] = (
    Family(
        "sglang:max_total_num_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Maximum total number of tokens in the KV cache pool.",
    ),
    Family(
        "sglang:weight_memory_usage_gb", GAUGE, SCHEDULER, (), "Memory used by model weights in GB."
    ),
    Family(
        "sglang:kv_cache_memory_usage_gb",
        GAUGE,
        SCHEDULER,
        (),
        "Memory used by the KV cache pools in GB.",
    ),
    Family(
        "sglang:graph_memory_usage_gb",
        GAUGE,
        SCHEDULER,
        ("phase",),
        "Memory used by captured device graphs in GB.",
        initial=tuple((p,) for p in GRAPH_PHASES),
    ),
    Family("sglang:page_size", GAUGE, SCHEDULER, (), "KV cache page size in tokens."),
    Family("sglang:num_pages", GAUGE, SCHEDULER, (), "Number of KV cache pages."),
    Family("sglang:context_len", GAUGE, SCHEDULER, (), "Maximum context length."),
    Family(
        "sglang:startup_available_gpu_memory_gb",
        GAUGE,
        SCHEDULER,
        (),
        "Available GPU memory in GB at startup.",
    ),
    Family("sglang:num_running_reqs", GAUGE, SCHEDULER, (), "The number of running requests."),
    Family(
        "sglang:num_queue_reqs",
        GAUGE,
        SCHEDULER,
        (),
        "The number of requests in the waiting queue.",
    ),
    Family(
        "sglang:num_grammar_queue_reqs",
        GAUGE,
        SCHEDULER,
        (),
        "The number of requests in the grammar waiting queue.",
    ),
    Family("sglang:gen_throughput", GAUGE, SCHEDULER, (), "The generation throughput (token/s)."),
    Family("sglang:cache_hit_rate", GAUGE, SCHEDULER, (), "The prefix cache hit rate."),
    Family(
        "sglang:decode_sum_seq_lens",
        GAUGE,
        SCHEDULER,
        (),
        "The sum of all sequence lengths in decode.",
    ),
    Family("sglang:token_usage", GAUGE, SCHEDULER, (), "The token usage."),
    Family(
        "sglang:full_token_usage",
        GAUGE,
        SCHEDULER,
        (),
        "The token usage for full attention layers.",
    ),
    Family("sglang:swa_token_usage", GAUGE, SCHEDULER, (), "The token usage for SWA layers."),
    Family("sglang:mamba_usage", GAUGE, SCHEDULER, (), "The token usage for Mamba layers."),
    Family("sglang:num_used_tokens", GAUGE, SCHEDULER, (), "The number of used tokens."),
    Family(
        "sglang:kv_available_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Number of free token slots in the KV cache pool.",
    ),
    Family(
        "sglang:kv_evictable_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Number of evictable (radix-cached) token slots in the KV cache pool.",
    ),
    Family(
        "sglang:kv_used_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Number of actively used token slots in the KV cache pool.",
    ),
    Family(
        "sglang:swa_available_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Number of free token slots in the SWA pool (hybrid-SWA only).",
    ),
    Family(
        "sglang:swa_evictable_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Number of evictable (radix-cached) token slots in the SWA pool.",
    ),
    Family(
        "sglang:swa_used_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Number of actively used token slots in the SWA pool.",
    ),
    Family(
        "sglang:mamba_available_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Number of free state slots in the mamba SSM pool (hybrid-SSM only).",
    ),
    Family(
        "sglang:mamba_evictable_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Number of evictable (radix-cached) state slots in the mamba SSM pool.",
    ),
    Family(
        "sglang:mamba_used_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Number of actively used state slots in the mamba SSM pool.",
    ),
    Family(
        "sglang:spec_accept_length",
        GAUGE,
        SCHEDULER,
        (),
        "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
    ),
    Family(
        "sglang:spec_accept_rate",
        GAUGE,
        SCHEDULER,
        (),
        "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
    ),
    Family(
        "sglang:spec_cap_length",
        GAUGE,
        SCHEDULER,
        (),
        "Mean DSpark confidence-scheduled verify window per verify step, incl the bonus slot (0 when no cap is scheduled).",
    ),
    Family(
        "sglang:spec_block_accept_length",
        GAUGE,
        SCHEDULER,
        (),
        "Mean uncapped full-block accept length per verify step (accept + cap-trimmed drafts; exact only in DSpark cap-accept mode).",
    ),
    Family(
        "sglang:spec_num_steps", GAUGE, SCHEDULER, (), "Currently active speculative_num_steps."
    ),
    Family(
        "sglang:spec_num_draft_tokens",
        GAUGE,
        SCHEDULER,
        (),
        "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).",
    ),
    Family(
        "sglang:num_prefill_bootstrap_queue_reqs",
        GAUGE,
        SCHEDULER,
        (),
        "The number of requests in the prefill bootstrap queue.",
    ),
    Family(
        "sglang:num_prefill_inflight_queue_reqs",
        GAUGE,
        SCHEDULER,
        (),
        "The number of requests in the prefill inflight queue.",
    ),
    Family(
        "sglang:num_decode_prealloc_queue_reqs",
        GAUGE,
        SCHEDULER,
        (),
        "The number of requests in the decode prealloc queue.",
    ),
    Family(
        "sglang:num_decode_transfer_queue_reqs",
        GAUGE,
        SCHEDULER,
        (),
        "The number of requests in the decode transfer queue.",
    ),
    Family(
        "sglang:num_decode_host_receive_queue_reqs",
        GAUGE,
        SCHEDULER,
        (),
        "Requests in the decode transfer queue receiving into host memory or waiting for device admission.",
    ),
    Family(
        "sglang:num_decode_deferred_kv_release_reqs",
        GAUGE,
        SCHEDULER,
        (),
        "The number of failed decode requests whose KV allocations are held pending transfer drain acknowledgement or timeout.",
    ),
    Family(
        "sglang:pending_prealloc_token_usage",
        GAUGE,
        SCHEDULER,
        (),
        "The token usage for pending preallocated tokens (not preallocated yet).",
    ),
    Family(
        "sglang:prealloc_full_token_usage",
        GAUGE,
        SCHEDULER,
        (),
        "Share of the full-attention KV pool held by decode requests whose KV transfer is pending (preallocated, not yet running); same capacity basis as sglang:full_token_usage.",
    ),
    Family(
        "sglang:prealloc_swa_token_usage",
        GAUGE,
        SCHEDULER,
        (),
        "Share of the SWA KV pool held by decode requests whose KV transfer is pending; same capacity basis as sglang:swa_token_usage.",
    ),
    Family("sglang:utilization", GAUGE, SCHEDULER, (), "The utilization."),
    Family("sglang:fwd_occupancy", GAUGE, SCHEDULER, (), "Forward pass GPU occupancy percentage."),
    Family("sglang:new_token_ratio", GAUGE, SCHEDULER, (), "The new token ratio."),
    Family("sglang:is_cuda_graph", GAUGE, SCHEDULER, (), "Whether the batch is using CUDA graph."),
    Family(
        "sglang:num_unique_running_routing_keys",
        GAUGE,
        SCHEDULER,
        (),
        "Number of unique routing keys in running batch.",
    ),
    Family(
        "sglang:routing_key_running_req_count",
        GAUGE,
        SCHEDULER,
        ("gt", "le"),
        "Distribution of routing keys by running request count (gt < count <= le).",
        initial=ROUTING_KEY_RANGES,
    ),
    Family(
        "sglang:routing_key_all_req_count",
        GAUGE,
        SCHEDULER,
        ("gt", "le"),
        "Distribution of routing keys by running+waiting request count (gt < count <= le).",
        initial=ROUTING_KEY_RANGES,
    ),
    Family(
        "sglang:startup_time_seconds",
        GAUGE,
        TOKENIZER,
        ("phase",),
        "Engine startup duration by phase in seconds.",
        initial=tuple((p,) for p in STARTUP_PHASES),
    ),
    Family(
        "sglang:startup_cuda_graph_time_seconds",
        GAUGE,
        TOKENIZER,
        ("phase",),
        "CUDA graph capture duration by phase in seconds.",
        initial=tuple((p,) for p in GRAPH_PHASES),
    ),
    Family(
        "sglang:num_retracted_reqs",
        GAUGE,
        SCHEDULER,
        (),
        "The number of retracted requests.",
        per_process=True,
    ),
    Family(
        "sglang:num_paused_reqs",
        GAUGE,
        SCHEDULER,
        (),
        "The number of paused requests by async weight sync.",
        per_process=True,
    ),
    Family(
        "sglang:dp_attention_token_imbalance_ratio",
        HISTOGRAM,
        SCHEDULER,
        (),
        "Per MLP-sync step, max tokens over mean tokens across the DP ranks (1.0 = balanced, num_dp_ranks = one busy rank). Reported once per engine, by the scheduler of DP rank 0.",
        buckets=DP_IMBALANCE_BUCKETS,
    ),
    Family(
        "sglang:dp_attention_sync_wait_seconds",
        HISTOGRAM,
        SCHEDULER,
        (),
        "Wall time of this DP rank's scheduler MLP-sync all-gather per step. On the gloo path (the default with overlap scheduling) this is waiting for the slowest rank; on the device-group paths it also includes the gather's stream sync.",
        buckets=DP_SYNC_WAIT_BUCKETS_S,
    ),
    Family(
        "sglang:per_stage_req_latency_seconds",
        HISTOGRAM,
        SCHEDULER,
        ("stage",),
        "The latency of each stage of requests.",
        buckets=PER_STAGE_BUCKETS_S,
        initial=(),
    ),
    Family(
        "sglang:queue_time_seconds",
        HISTOGRAM,
        SCHEDULER,
        (),
        "Histogram of queueing time in seconds.",
        buckets=QUEUE_BUCKETS_S,
    ),
    Family(
        "sglang:time_to_first_token_seconds",
        HISTOGRAM,
        TOKENIZER,
        ("is_streaming",),
        "Histogram of time to first token in seconds.",
        buckets=TTFT_BUCKETS_S,
        initial=(),
    ),
    Family(
        "sglang:inter_token_latency_seconds",
        HISTOGRAM,
        TOKENIZER,
        (),
        "Histogram of inter-token latency in seconds.",
        buckets=ITL_BUCKETS_S,
    ),
    Family(
        "sglang:e2e_request_latency_seconds",
        HISTOGRAM,
        TOKENIZER,
        ("is_streaming",),
        "Histogram of End-to-end request latency in seconds",
        buckets=E2E_BUCKETS_S,
        initial=(),
    ),
    Family(
        "sglang:request_time_per_output_token_seconds",
        HISTOGRAM,
        TOKENIZER,
        ("is_streaming",),
        "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
        buckets=ITL_BUCKETS_S,
        initial=(),
    ),
    Family(
        "sglang:prompt_tokens_histogram",
        HISTOGRAM,
        TOKENIZER,
        (),
        "Histogram of prompt token length.",
        buckets=TOKEN_COUNT_BUCKETS,
    ),
    Family(
        "sglang:uncached_prompt_tokens_histogram",
        HISTOGRAM,
        TOKENIZER,
        (),
        "Histogram of uncached (compute) prompt token length.",
        buckets=TOKEN_COUNT_BUCKETS,
    ),
    Family(
        "sglang:generation_tokens_histogram",
        HISTOGRAM,
        TOKENIZER,
        (),
        "Histogram of generation token length.",
        buckets=TOKEN_COUNT_BUCKETS,
    ),
    Family(
        "sglang:func_latency_seconds",
        HISTOGRAM,
        NONE,
        ("name",),
        "Function latency in seconds",
        buckets=FUNC_LATENCY_BUCKETS_S,
        initial=(),
    ),
    Family(
        "sglang:routing_keys_active",
        GAUGE,
        NONE,
        (),
        "Number of unique routing keys with active requests",
    ),
    Family(
        "sglang:http_requests_active",
        GAUGE,
        NONE,
        ("endpoint", "method"),
        "Number of currently active HTTP requests",
        initial=(),
    ),
    Family(
        "sglang:prefill_effective_tokens_total",
        COUNTER,
        SCHEDULER,
        ("mode",),
        "Effective prefill tokens with retracted-request re-counts excluded, updated on each log interval. mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit rate = rate(sum of *_hit) / rate(sum of all modes); per-tier rate uses a single *_hit mode in the numerator.",
        initial=(("input",), ("device_hit",), ("host_hit",), ("storage_hit",)),
    ),
    Family(
        "sglang:scheduler_idle_seconds_total",
        COUNTER,
        SCHEDULER,
        (),
        "Total wall time while the scheduler has no runnable or queued work.",
    ),
    Family(
        "sglang:scheduler_process_cpu_seconds_total",
        COUNTER,
        SCHEDULER,
        (),
        "Total CPU time consumed by the scheduler process across all threads.",
    ),
    Family(
        "sglang:scheduler_stage_seconds_total",
        COUNTER,
        SCHEDULER,
        ("category", "forward_overlap"),
        "Total scheduler-loop wall time exclusively attributed to each stage. forward_overlap (full, partial, none): full=both endpoints active, partial=one, none=no observed overlap (including unavailable timing). Not exact overlapped/exposed seconds.",
        initial=tuple((s, "none") for s in SCHEDULER_STAGES),
    ),
    Family(
        "sglang:dp_attention_tokens_total",
        COUNTER,
        SCHEDULER,
        ("kind",),
        "Tokens of MLP-sync steps on this DP rank. kind=scheduled: tokens this rank ran; kind=imbalance: tokens the busiest rank ran beyond this rank, i.e. capacity lost to DP imbalance on this rank. On speculative-decode steps the unit is batch rows (requests).",
        initial=(("scheduled",), ("imbalance",)),
    ),
    Family(
        "sglang:dp_attention_steps_total",
        COUNTER,
        SCHEDULER,
        ("rank_state",),
        "MLP-sync steps on this DP rank. rank_state=idle: this rank had no tokens and only ran to keep the DP collectives in lockstep.",
        initial=(("active",), ("idle",)),
    ),
    Family(
        "sglang:dp_attention_pairs_total",
        COUNTER,
        SCHEDULER,
        ("kind",),
        "Causal (query, key) pairs attended by MLP-sync steps on this DP rank, pricing every layer as full attention: a decode row reads its sequence, a prefill chunk its prefix plus the pairs within the chunk. kind=scheduled: this rank; kind=imbalance: the busiest rank's excess over this rank. The context-length counterpart of sglang:dp_attention_tokens_total; like it, speculative-decode steps count one query per row. Sliding-window layers execute fewer pairs than counted, so on hybrid-SWA models long rows are overstated.",
        initial=(("scheduled",), ("imbalance",)),
    ),
    Family(
        "sglang:cuda_graph_passes_total",
        COUNTER,
        SCHEDULER,
        ("mode",),
        "Total number of forward passes categorized by CUDA graph.",
        initial=(),
    ),
    Family(
        "sglang:realtime_tokens_total",
        COUNTER,
        SCHEDULER,
        ("mode",),
        "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
        initial=(),
    ),
    Family(
        "sglang:prompt_tokens_total",
        COUNTER,
        TOKENIZER,
        ("is_streaming",),
        "Number of prefill tokens processed.",
        initial=(),
    ),
    Family(
        "sglang:generation_tokens_total",
        COUNTER,
        TOKENIZER,
        ("is_streaming",),
        "Number of generation tokens processed.",
        initial=(),
    ),
    Family(
        "sglang:num_requests_total",
        COUNTER,
        TOKENIZER,
        ("is_streaming",),
        "Number of requests processed.",
        initial=(),
    ),
    Family(
        "sglang:cached_tokens_total",
        COUNTER,
        TOKENIZER,
        ("cache_source",),
        "Number of cached prompt tokens by source (device/host/storage).",
        initial=(),
    ),
    Family(
        "sglang:http_requests_total",
        COUNTER,
        NONE,
        ("endpoint", "method"),
        "Total number of HTTP requests by endpoint and method",
        initial=(),
    ),
    Family(
        "sglang:http_responses_total",
        COUNTER,
        NONE,
        ("endpoint", "method", "status_code"),
        "Total number of HTTP responses by endpoint and status code",
        initial=(),
    ),
    Family(
        "sglang:process_cpu_seconds_total",
        COUNTER,
        NONE,
        ("component",),
        "Total CPU time consumed by this process (user + system)",
        initial=(("tokenizer",), ("detokenizer",)),
    ),
    # Not in a scrape until their first event: a retraction, an abort.
    Family(
        "sglang:num_retracted_requests_total",
        COUNTER,
        SCHEDULER,
        (),
        "Total number of retracted requests.",
        initial=(),
    ),
    Family(
        "sglang:num_retracted_input_tokens_total",
        COUNTER,
        SCHEDULER,
        (),
        "Total number of retracted input tokens.",
        initial=(),
    ),
    Family(
        "sglang:num_retracted_output_tokens_total",
        COUNTER,
        SCHEDULER,
        (),
        "Total number of retracted output tokens.",
        initial=(),
    ),
    Family(
        "sglang:num_aborted_requests_total",
        COUNTER,
        TOKENIZER,
        (),
        "Number of requests aborted.",
        initial=(),
    ),
)
