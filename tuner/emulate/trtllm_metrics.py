"""TensorRT-LLM's metrics, fed by the emulated engine: ``/metrics`` JSON and Prometheus.

``trtllm-serve`` answers ``GET /metrics`` with the iteration statistics gathered since the
previous call (a JSON list, one object per iteration, at most ``_MAX_ITERATIONS`` kept) and
then forgets them: a GET drains the queue. Field names follow the executor's
``IterationStats`` JSON (``iter``, ``iterLatencyMS``, ``numActiveRequests``,
``kvCacheStats``, ``inflightBatchingStats``, ...). ``GET /prometheus/metrics`` serves the
``trtllm_`` families of ``tensorrt_llm/metrics/collector.py`` (labels ``model_name`` and
``engine_type``) with its default buckets.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from slotune.tuner.emulate.events import FinishedRequest, FinishReason, StepReport
from slotune.tuner.emulate.vllm_metrics import (
    REQUEST_LATENCY_BUCKETS_S,
    TOKEN_LATENCY_BUCKETS_S,
    TTFT_BUCKETS_S,
)

_MAX_ITERATIONS = 1000
# TensorRT-LLM's collector adapts vLLM's metrics and keeps its bucket boundaries, except for
# the prefill-time histogram.
_PREFILL_BUCKETS_S = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
_LABELS = ("model_name", "engine_type")


@dataclass(frozen=True, slots=True)
class TrtllmStatic:
    """Engine limits reported in every iteration: ``max_batch_size``, ``max_num_tokens``,
    the KV block size (``tokens_per_block``) and the emulated GPU memory in use."""

    max_batch_size: int
    max_num_tokens: int
    tokens_per_block: int
    gpu_mem_usage_bytes: int


class TrtllmMetrics:
    """Iteration-stats queue plus the ``trtllm_`` Prometheus registry for one engine."""

    def __init__(self, model_name: str, static: TrtllmStatic) -> None:
        self._static = static
        self._iterations: deque[dict[str, Any]] = deque(maxlen=_MAX_ITERATIONS)
        self._total_blocks_allocated = 0
        self.registry = CollectorRegistry(auto_describe=True)
        values = (model_name, "trtllm")
        reg = self.registry

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge("trtllm_" + name, doc, _LABELS, registry=reg).labels(*values)

        def counter(name: str, doc: str) -> Counter:
            return Counter("trtllm_" + name, doc, _LABELS, registry=reg).labels(*values)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram("trtllm_" + name, doc, _LABELS, registry=reg, buckets=buckets).labels(
                *values
            )

        success = Counter(
            "trtllm_request_success_total",
            "Count of successfully processed requests.",
            (*_LABELS, "finished_reason"),
            registry=reg,
        )
        self._success = {r: success.labels(*values, r.value) for r in FinishReason}
        self._e2e = histogram(
            "e2e_request_latency_seconds",
            "Histogram of end to end request latency in seconds.",
            REQUEST_LATENCY_BUCKETS_S,
        )
        self._ttft = histogram(
            "time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS_S,
        )
        self._tpot = histogram(
            "time_per_output_token_seconds",
            "Histogram of time per output token in seconds.",
            TOKEN_LATENCY_BUCKETS_S,
        )
        self._queue = histogram(
            "request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS_S,
        )
        self._prefill = histogram(
            "request_prefill_time_seconds",
            "Histogram of prefill (context) phase duration in seconds "
            "(first_token_time - first_scheduled_time).",
            _PREFILL_BUCKETS_S,
        )
        self._decode = histogram(
            "request_decode_time_seconds",
            "Histogram of decode (generation) phase duration in seconds "
            "(last_token_time - first_token_time).",
            REQUEST_LATENCY_BUCKETS_S,
        )
        self._inference = histogram(
            "request_inference_time_seconds",
            "Histogram of total inference duration in seconds "
            "(last_token_time - first_scheduled_time).",
            REQUEST_LATENCY_BUCKETS_S,
        )
        self._prompt_tokens = counter(
            "prompt_tokens_total", "Cumulative number of prompt (input) tokens processed."
        )
        self._generation_tokens = counter(
            "generation_tokens_total", "Cumulative number of generation (output) tokens produced."
        )
        self._hit_rate = gauge("kv_cache_hit_rate", "KV cache hit rate")
        self._utilization = gauge("kv_cache_utilization", "KV cache utilization")
        self._reused_blocks = counter(
            "kv_cache_reused_blocks", "Cumulative number of KV cache blocks reused (cache hits)"
        )
        self._missed_blocks = counter(
            "kv_cache_missed_blocks", "Cumulative number of KV cache blocks missed (cache misses)"
        )
        self._running = gauge("num_requests_running", "Number of active requests")
        self._waiting = gauge("num_requests_waiting", "Number of queued requests")
        self._completed = counter(
            "num_requests_completed_total", "Total number of completed requests across iterations"
        )
        self._iteration_latency = gauge("iteration_latency_seconds", "Iteration latency in seconds")
        self._max_blocks = gauge("kv_cache_max_blocks", "Maximum number of KV cache blocks")
        self._free_blocks = gauge("kv_cache_free_blocks", "Number of free KV cache blocks")
        self._used_blocks = gauge("kv_cache_used_blocks", "Number of used KV cache blocks")
        self._tokens_per_block = gauge(
            "kv_cache_tokens_per_block", "Number of tokens per KV cache block"
        )
        self._context_requests = gauge(
            "num_context_requests", "Number of context (prefill) requests"
        )
        self._generation_requests = gauge(
            "num_generation_requests", "Number of generation (decode) requests"
        )
        self._scheduled_requests = gauge("num_scheduled_requests", "Number of scheduled requests")
        self._context_tokens = gauge("total_context_tokens", "Total number of context tokens")
        self._tokens_per_block.set(static.tokens_per_block)

    def on_step(self, report: StepReport) -> None:
        """Queue the iteration's JSON stats and update the iteration-level gauges."""
        stats = self._iteration_stats(report)
        self._iterations.append(stats)
        kv = stats["kvCacheStats"]
        ifb = stats["inflightBatchingStats"]
        self._hit_rate.set(kv["cacheHitRate"])
        self._utilization.set(report.counters.kv_usage)
        self._reused_blocks.inc(kv["reusedBlocks"])
        self._missed_blocks.inc(kv["missedBlocks"])
        self._running.set(stats["numActiveRequests"])
        self._waiting.set(stats["numQueuedRequests"])
        self._completed.inc(stats["numCompletedRequests"])
        self._iteration_latency.set(report.duration_s)
        self._max_blocks.set(kv["maxNumBlocks"])
        self._free_blocks.set(kv["freeNumBlocks"])
        self._used_blocks.set(kv["usedNumBlocks"])
        self._context_requests.set(ifb["numContextRequests"])
        self._generation_requests.set(ifb["numGenRequests"])
        self._scheduled_requests.set(ifb["numScheduledRequests"])
        self._context_tokens.set(ifb["numCtxTokens"])
        self._prompt_tokens.inc(report.prompt_tokens)
        self._generation_tokens.inc(report.generation_tokens)
        for ttft_s in report.ttfts_s:
            self._ttft.observe(ttft_s)

    def on_finished(self, request: FinishedRequest) -> None:
        """Record one finished request's latencies."""
        self._success[request.finish_reason].inc()
        self._e2e.observe(request.e2e_s)
        self._tpot.observe(request.mean_tpot_s)
        self._queue.observe(request.queue_s)
        self._prefill.observe(request.prefill_s)
        self._decode.observe(request.decode_s)
        self._inference.observe(request.inference_s)

    def drain_iterations(self) -> list[dict[str, Any]]:
        """The iteration stats gathered since the previous call (``GET /metrics``)."""
        out = list(self._iterations)
        self._iterations.clear()
        return out

    def render(self) -> bytes:
        """The Prometheus text exposition (``GET /prometheus/metrics``)."""
        return generate_latest(self.registry)

    def _iteration_stats(self, report: StepReport) -> dict[str, Any]:
        counters = report.counters
        block_size = self._static.tokens_per_block
        reused = report.prefix_hits // block_size
        missed = -(-(report.prefix_queries - report.prefix_hits) // block_size)
        self._total_blocks_allocated += missed
        used_blocks = round(counters.kv_usage * counters.kv_blocks)
        queue_ms = [s * 1000.0 for s in report.new_requests_queue_s]
        return {
            "timestamp": time.strftime("%m-%d-%Y %H:%M:%S"),
            "iter": report.index,
            "iterLatencyMS": report.duration_s * 1000.0,
            "newActiveRequestsQueueLatencyMS": sum(queue_ms) / len(queue_ms) if queue_ms else 0.0,
            "numNewActiveRequests": len(report.new_requests_queue_s),
            "numActiveRequests": counters.requests_running,
            "numQueuedRequests": counters.requests_waiting,
            "numCompletedRequests": report.num_completed,
            "maxNumActiveRequests": self._static.max_batch_size,
            "maxBatchSizeStatic": self._static.max_batch_size,
            "maxNumTokensStatic": self._static.max_num_tokens,
            "gpuMemUsage": self._static.gpu_mem_usage_bytes,
            "cpuMemUsage": 0,
            "pinnedMemUsage": 0,
            "kvCacheStats": {
                "maxNumBlocks": counters.kv_blocks,
                "freeNumBlocks": counters.kv_blocks - used_blocks,
                "usedNumBlocks": used_blocks,
                "tokensPerBlock": block_size,
                "allocTotalBlocks": self._total_blocks_allocated,
                "allocNewBlocks": missed,
                "reusedBlocks": reused,
                "missedBlocks": missed,
                "cacheHitRate": reused / (reused + missed) if reused + missed else 0.0,
            },
            "inflightBatchingStats": {
                "numScheduledRequests": counters.requests_running,
                "numContextRequests": report.num_context_requests,
                "numGenRequests": report.num_generation_requests,
                "numPausedRequests": 0,
                "numCtxTokens": report.prompt_tokens,
                "microBatchId": 0,
                "avgNumDecodedTokensPerIter": 1.0 if report.generation_tokens else 0.0,
            },
        }
