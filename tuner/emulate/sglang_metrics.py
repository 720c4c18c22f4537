"""SGLang's Prometheus metrics, fed by the emulated engine.

Every family of :mod:`.sglang_families` is served with SGLang's names, types, labels and
buckets; the ones the simulated engine has a counterpart for carry its figures, the rest
(speculative decoding, PD disaggregation, hybrid SWA / Mamba pools, DP attention, routing
keys) stay at 0 as on a default single-GPU SGLang server. What is fed, and from what:

- scheduler gauges after every step: ``num_running_reqs``, ``num_queue_reqs``,
  ``token_usage`` / ``full_token_usage`` (the KV pool's usage), ``num_used_tokens`` /
  ``kv_used_tokens`` / ``kv_available_tokens`` (its tokens), ``cache_hit_rate`` (the prefix
  hits of the last prefill step), ``gen_throughput`` (output tokens per second over the last
  ``DECODE_LOG_INTERVAL`` decode steps, as SGLang logs it), ``num_retracted_reqs`` and
  ``is_cuda_graph``;
- scheduler counters: ``realtime_tokens_total`` (prefill_compute / prefill_cache / decode),
  ``prefill_effective_tokens_total``, ``cuda_graph_passes_total`` (prefill steps run eager,
  decode steps on a CUDA graph unless the engine runs eager) and, from the first retraction
  on, ``num_retracted_requests_total`` (with the retracted token counters, kept at 0: the
  engine does not report the tokens a retraction drops);
- ``queue_time_seconds`` for every request when first scheduled, and
  ``per_stage_req_latency_seconds`` (``prefill_forward``: first scheduled to first token;
  ``request_process``: 0, the emulated scheduler takes a request in at once);
- tokenizer families at each finished request, labelled ``is_streaming``: tokens, requests,
  ``cached_tokens_total`` (``cache_source="device"``), TTFT, per-request TPOT, end-to-end
  latency and the token-count histograms; ``inter_token_latency_seconds`` at every step;
  an aborted request counts in ``num_aborted_requests_total`` only;
- ``func_latency_seconds{name="generate_request"}`` (the request's time in the server),
  the HTTP families (:meth:`SglangMetrics.middleware`) and the process CPU time.

TTFT is observed when the request finishes rather than at its first token, so a scrape
taken while a request is running does not count it yet. Latencies are measured on the
server's wall clock, so with ``--speedup K`` they are K times shorter than the emulated GPU's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from slotune.tuner.emulate.events import FinishedRequest, FinishReason, StepReport
from slotune.tuner.emulate.sglang_families import FAMILIES, Family, Kind, Scope

DECODE_LOG_INTERVAL = 40
"""SGLang's ``--decode-log-interval`` default: decode steps between throughput updates."""
_GIB = float(1 << 30)
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class SglangStatic:
    """What SGLang reports once at start-up (``emit_constants``)."""

    context_len: int
    page_size: int
    max_total_num_tokens: int
    weight_bytes: int
    kv_cache_bytes: int
    cuda_graph_bytes: int
    available_bytes: int
    cuda_graph: bool


class SglangMetrics:
    """A Prometheus registry with SGLang's metric families for one engine.

    Args:
        model_name: the served model name (label ``model_name``).
        static: the start-up constants.
    """

    def __init__(self, model_name: str, static: SglangStatic) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._static = static
        self._scope_values = {
            Scope.SCHEDULER: (model_name, "unified", "0", "0", "0"),
            Scope.TOKENIZER: (model_name, "unified"),
            Scope.NONE: (),
        }
        self._families = {f.name: f for f in FAMILIES}
        self._gauges: dict[str, Gauge] = {}
        self._counters: dict[str, Counter] = {}
        self._histograms: dict[str, Histogram] = {}
        for family in FAMILIES:
            self._create(family)
        self._decode_steps = 0
        self._decode_tokens = 0
        self._decode_tic = time.monotonic()
        self._cpu_s = time.process_time()
        self._emit_constants()

    def _create(self, family: Family) -> None:
        names = (*family.scope.value, *family.labels, *(("pid",) if family.per_process else ()))
        reg = self.registry
        metric: Gauge | Counter | Histogram
        if family.kind is Kind.GAUGE:
            metric = self._gauges[family.name] = Gauge(family.name, family.doc, names, registry=reg)
        elif family.kind is Kind.COUNTER:
            metric = Counter(family.name, family.doc, names, registry=reg)
            self._counters[family.name] = metric
        else:
            metric = Histogram(family.name, family.doc, names, registry=reg, buckets=family.buckets)
            self._histograms[family.name] = metric
        for values in family.initial:
            if names:  # an unlabelled family is its one series already
                metric.labels(*self._label_values(family.name, values))

    def _label_values(self, name: str, values: tuple[str, ...]) -> tuple[str, ...]:
        family = self._families[name]
        pid = (str(os.getpid()),) if family.per_process else ()
        return (*self._scope_values[family.scope], *values, *pid)

    def _set(self, name: str, value: float, *values: str) -> None:
        self._gauges[name].labels(*self._label_values(name, values)).set(value)

    def _inc(self, name: str, amount: float, *values: str) -> None:
        self._counters[name].labels(*self._label_values(name, values)).inc(amount)

    def _observe(self, name: str, value: float, *values: str) -> None:
        self._histograms[name].labels(*self._label_values(name, values)).observe(value)

    def _emit_constants(self) -> None:
        s = self._static
        self._set("sglang:max_total_num_tokens", s.max_total_num_tokens)
        self._set("sglang:weight_memory_usage_gb", s.weight_bytes / _GIB)
        self._set("sglang:kv_cache_memory_usage_gb", s.kv_cache_bytes / _GIB)
        self._set("sglang:graph_memory_usage_gb", s.cuda_graph_bytes / _GIB, "decode")
        self._set("sglang:page_size", s.page_size)
        self._set("sglang:num_pages", s.max_total_num_tokens // s.page_size)
        self._set("sglang:context_len", s.context_len)
        self._set("sglang:startup_available_gpu_memory_gb", s.available_bytes / _GIB)

    def on_step(self, report: StepReport) -> None:
        """Record one scheduler step (scheduler gauges and counters, queue times, ITL)."""
        counters = report.counters
        used = round(counters.kv_usage * counters.kv_tokens)
        self._set("sglang:num_running_reqs", counters.requests_running)
        self._set("sglang:num_queue_reqs", counters.requests_waiting)
        for name in ("sglang:token_usage", "sglang:full_token_usage"):
            self._set(name, counters.kv_usage)
        for name in ("sglang:num_used_tokens", "sglang:kv_used_tokens"):
            self._set(name, used)
        self._set("sglang:kv_available_tokens", counters.kv_tokens - used)
        self._set("sglang:num_retracted_reqs", report.preemptions)
        if report.preemptions:
            self._inc("sglang:num_retracted_requests_total", report.preemptions)
            self._inc("sglang:num_retracted_input_tokens_total", 0)
            self._inc("sglang:num_retracted_output_tokens_total", 0)
        is_prefill = report.prompt_tokens + report.prefix_hits > 0
        if is_prefill:
            self._on_prefill(report)
        elif report.generation_tokens:
            self._on_decode(report)
        if report.generation_tokens:
            self._inc("sglang:realtime_tokens_total", report.generation_tokens, "decode")
        for queue_s in report.new_requests_queue_s:
            self._observe("sglang:queue_time_seconds", queue_s)
        for itl_s in report.itls_s:
            self._observe("sglang:inter_token_latency_seconds", itl_s)

    def _on_prefill(self, report: StepReport) -> None:
        computed, hits = report.prompt_tokens, report.prefix_hits
        self._set("sglang:cache_hit_rate", hits / (computed + hits))
        self._set("sglang:is_cuda_graph", 0)
        self._inc("sglang:cuda_graph_passes_total", 1, "prefill_none")
        self._inc("sglang:realtime_tokens_total", computed, "prefill_compute")
        self._inc("sglang:realtime_tokens_total", hits, "prefill_cache")
        self._inc("sglang:prefill_effective_tokens_total", computed, "input")
        self._inc("sglang:prefill_effective_tokens_total", hits, "device_hit")

    def _on_decode(self, report: StepReport) -> None:
        graph = self._static.cuda_graph
        self._set("sglang:is_cuda_graph", int(graph))
        mode = "decode_cuda_graph" if graph else "decode_none"
        self._inc("sglang:cuda_graph_passes_total", 1, mode)
        self._decode_steps += 1
        self._decode_tokens += report.generation_tokens
        if self._decode_steps % DECODE_LOG_INTERVAL == 0:
            now = time.monotonic()
            self._set("sglang:gen_throughput", self._decode_tokens / (now - self._decode_tic))
            self._decode_tokens, self._decode_tic = 0, now

    def on_finished(self, request: FinishedRequest) -> None:
        """Record one finished request, or count an aborted one."""
        if request.finish_reason is FinishReason.ABORT:
            self._inc("sglang:num_aborted_requests_total", 1)
            return
        stream = "true" if request.wire is not None else "false"
        self._inc("sglang:prompt_tokens_total", request.prompt_tokens, stream)
        self._inc("sglang:generation_tokens_total", request.completion_tokens, stream)
        self._inc("sglang:num_requests_total", 1, stream)
        if request.cached_tokens:
            self._inc("sglang:cached_tokens_total", request.cached_tokens, "device")
        if request.first_token_s is not None:
            ttft_s = request.first_token_s - request.arrival_s
            self._observe("sglang:time_to_first_token_seconds", ttft_s, stream)
        if request.completion_tokens > 1:
            tpot_s = request.mean_tpot_s
            self._observe("sglang:request_time_per_output_token_seconds", tpot_s, stream)
        self._observe("sglang:e2e_request_latency_seconds", request.e2e_s, stream)
        self._observe("sglang:prompt_tokens_histogram", request.prompt_tokens)
        uncached = request.prompt_tokens - request.cached_tokens
        self._observe("sglang:uncached_prompt_tokens_histogram", uncached)
        self._observe("sglang:generation_tokens_histogram", request.completion_tokens)
        self._observe("sglang:per_stage_req_latency_seconds", 0.0, "request_process")
        self._observe("sglang:per_stage_req_latency_seconds", request.prefill_s, "prefill_forward")
        self._observe("sglang:func_latency_seconds", request.e2e_s, "generate_request")

    @web.middleware
    async def middleware(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        """SGLang's HTTP middleware: requests, active requests and responses by route."""
        resource = request.match_info.route.resource
        endpoint = resource.canonical if resource is not None else request.path
        method = request.method
        self._inc("sglang:http_requests_total", 1, endpoint, method)
        active_name = "sglang:http_requests_active"
        active_series = self._gauges[active_name].labels(
            *self._label_values(active_name, (endpoint, method))
        )
        active_series.inc()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as e:
            status = e.status
            raise
        finally:
            active_series.dec()
            self._inc("sglang:http_responses_total", 1, endpoint, method, str(status))

    def render(self) -> bytes:
        """The Prometheus text exposition of the registry."""
        now_cpu_s = time.process_time()
        self._inc("sglang:process_cpu_seconds_total", now_cpu_s - self._cpu_s, "tokenizer")
        self._cpu_s = now_cpu_s
        return generate_latest(self.registry)
