"""slotune's canonical metric names and the rules that map raw exporter series onto them.

One name for one thing across engines: vLLM's ``vllm:time_to_first_token_seconds``, SGLang's
``sglang:time_to_first_token_seconds`` and TensorRT-LLM's ``trtllm_time_to_first_token_seconds``
all become the ``ttft`` histogram, stored Prometheus-style as ``ttft_bucket{le}``, ``ttft_sum``
and ``ttft_count``. Units are fixed per canonical name (seconds, bytes, ratios 0..1, watts),
and a rule's ``scale`` converts the raw unit (MiB, percent, milliwatts) on the way. The raw
labels are kept (``model_name``, ``engine``, ``gpu`` ...), after the source normalised them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slotune.collector.agent.base import Family, Labels, MetricType, Sample


@dataclass(frozen=True, slots=True)
class CanonicalMetric:
    """A canonical metric: its name, type, unit and meaning."""

    name: str
    type: MetricType
    unit: str
    description: str


_H, _C, _G = MetricType.HISTOGRAM, MetricType.COUNTER, MetricType.GAUGE

CANONICAL: dict[str, CanonicalMetric] = {
    m.name: m
    for m in (
        CanonicalMetric("ttft", _H, "s", "Time to first token, per request."),
        CanonicalMetric("itl", _H, "s", "Inter-token latency: gap between output tokens."),
        CanonicalMetric("tpot", _H, "s", "Per request (e2e - ttft) / (output tokens - 1)."),
        CanonicalMetric("e2e", _H, "s", "End-to-end request latency in the engine."),
        CanonicalMetric("queue_time", _H, "s", "Time a request waited before running."),
        CanonicalMetric("prefill_time", _H, "s", "Time a request spent in prefill."),
        CanonicalMetric("decode_time", _H, "s", "Time a request spent in decode."),
        CanonicalMetric("iteration_latency", _H, "s", "Engine step (iteration) latency."),
        CanonicalMetric("iteration_tokens", _H, "1", "Tokens scheduled per engine step."),
        CanonicalMetric("request_prompt_tokens", _H, "1", "Prompt tokens per finished request."),
        CanonicalMetric(
            "request_generation_tokens", _H, "1", "Output tokens per finished request."
        ),
        CanonicalMetric("requests_running", _G, "1", "Requests in the running batch."),
        CanonicalMetric("requests_waiting", _G, "1", "Requests queued, not yet running."),
        CanonicalMetric("kv_usage", _G, "ratio", "Fraction of KV-cache blocks in use (0..1)."),
        CanonicalMetric(
            "prefix_hit_rate", _G, "ratio", "Prefix-cache hit rate as the engine reports it (0..1)."
        ),
        CanonicalMetric(
            "prefix_queries",
            _C,
            "1",
            "Prefix-cache lookups (tokens for vLLM, blocks for TensorRT-LLM).",
        ),
        CanonicalMetric("prefix_hits", _C, "1", "Prefix-cache hits, same unit as queries."),
        CanonicalMetric("preemptions", _C, "1", "Requests preempted (vLLM) or retracted."),
        CanonicalMetric("prompt_tokens", _C, "1", "Prompt (prefill) tokens processed."),
        CanonicalMetric("generation_tokens", _C, "1", "Output tokens generated."),
        CanonicalMetric(
            "requests_finished", _C, "1", "Requests finished, label finished_reason where known."
        ),
        CanonicalMetric("iterations", _C, "1", "Engine steps (iterations) executed."),
        CanonicalMetric("vram_used", _G, "bytes", "GPU memory in use."),
        CanonicalMetric("vram_total", _G, "bytes", "GPU memory in total."),
        CanonicalMetric(
            "gpu_utilization", _G, "ratio", "Fraction of time a kernel ran on the GPU (0..1)."
        ),
        CanonicalMetric(
            "memory_utilization",
            _G,
            "ratio",
            "Fraction of time device memory was read or written (0..1).",
        ),
        CanonicalMetric("power_watts", _G, "W", "Power draw."),
        CanonicalMetric("power_limit_watts", _G, "W", "Power management limit."),
        CanonicalMetric("energy_joules", _C, "J", "Energy consumed since the driver loaded."),
        CanonicalMetric("temperature_celsius", _G, "Cel", "GPU temperature."),
        CanonicalMetric("memory_temperature_celsius", _G, "Cel", "Memory temperature."),
        CanonicalMetric("sm_clock_hz", _G, "Hz", "SM clock."),
        CanonicalMetric("memory_clock_hz", _G, "Hz", "Memory clock."),
        CanonicalMetric("pcie_tx_bytes_per_second", _G, "By/s", "PCIe transmit throughput."),
        CanonicalMetric("pcie_rx_bytes_per_second", _G, "By/s", "PCIe receive throughput."),
        CanonicalMetric("graphics_engine_active", _G, "ratio", "DCGM GR engine active (0..1)."),
        CanonicalMetric("tensor_active", _G, "ratio", "Tensor pipe active (0..1)."),
        CanonicalMetric("dram_active", _G, "ratio", "Device memory interface active (0..1)."),
        CanonicalMetric("process_vram_used", _G, "bytes", "GPU memory used per process (pid)."),
    )
}


@dataclass(frozen=True, slots=True)
class Rule:
    """Map one raw series onto a canonical metric.

    Attributes:
        source: the raw *sample* name for counters and gauges (``vllm:prompt_tokens_total``),
            the raw *family* name for histograms (``vllm:time_to_first_token_seconds``).
        target: the canonical name (a key of :data:`CANONICAL`).
        scale: factor from the raw unit to the canonical unit (applies to ``le`` and ``_sum``
            of histograms, and to values of counters and gauges).
    """

    source: str
    target: str
    scale: float = 1.0


ABORTED = "abort"  # the finished_reason of a request the engine gave up (vLLM's own word)
FINISHED = "finished"  # the finished_reason of a request whose engine does not say why


@dataclass(frozen=True, slots=True)
class RequestOutcomes:
    """Where an engine counts how its requests ended: the error-rate SLI's good and total.

    Attributes:
        finished: the raw counter of requests that ended (``vllm:request_success_total``).
        failed: the raw counter of failed requests, when the engine counts them apart and
            ``finished`` carries no ``finished_reason`` (SGLang's aborted requests); empty
            when ``finished`` labels each request's ``finished_reason``.
    """

    finished: str
    failed: str = ""


def outcome_family(families: Iterable[Family], outcomes: RequestOutcomes) -> tuple[Family, ...]:
    """``requests_finished`` labelled by ``finished_reason``, from an engine that counts its
    failed requests apart (``outcomes.failed``); empty when the engine exposes neither counter.

    The finished requests get ``finished_reason="finished"`` and the failed ones ``"abort"``,
    so the error-rate SLI reads them as it reads vLLM's reasons.
    """
    reason = {outcomes.finished: FINISHED, outcomes.failed: ABORTED}
    samples = tuple(
        Sample("requests_finished", tuple(sorted((*s.labels, ("finished_reason", why)))), s.value)
        for fam in families
        if fam.type is not MetricType.HISTOGRAM
        for s in fam.samples
        if (why := reason.get(s.name)) is not None
    )
    if not samples:
        return ()
    meta = CANONICAL["requests_finished"]
    return (Family("requests_finished", meta.type, samples, meta.description),)


def apply_rules(families: Iterable[Family], rules: Sequence[Rule]) -> tuple[Family, ...]:
    """Canonical families from raw ones.

    Rules are in priority order: when a target has two possible sources (vLLM's new
    ``vllm:kv_cache_usage_perc`` and its older ``vllm:gpu_cache_usage_perc``, both exposed by
    some releases) the first rule that matches wins.

    Args:
        families: raw families (already label-normalised by the source).
        rules: the source's rules.

    Returns:
        One canonical family per target that matched.
    """
    by_family = {f.name: f for f in families}
    by_sample: dict[str, list[Sample]] = {}
    for fam in by_family.values():
        if fam.type is not MetricType.HISTOGRAM:
            for s in fam.samples:
                by_sample.setdefault(s.name, []).append(s)
    out: dict[str, Family] = {}
    for rule in rules:
        if rule.target in out:
            continue
        metric = CANONICAL[rule.target]
        if metric.type is MetricType.HISTOGRAM:
            raw = by_family.get(rule.source)
            if raw is not None and raw.type is MetricType.HISTOGRAM:
                out[rule.target] = rename_histogram(raw, rule.target, rule.scale)
        elif rule.source in by_sample:
            samples = tuple(
                Sample(rule.target, s.labels, s.value * rule.scale) for s in by_sample[rule.source]
            )
            out[rule.target] = Family(rule.target, metric.type, samples, metric.description)
    return tuple(out.values())


def rename_histogram(fam: Family, target: str, scale: float = 1.0) -> Family:
    """A histogram family under a canonical name, with ``le`` and ``_sum`` scaled.

    A label set with a ``_count`` but no ``+Inf`` bucket (documentation excerpts, some
    exporters) gets one: by definition the ``+Inf`` bucket equals ``_count``, and quantiles
    need it.
    """
    samples = []
    has_inf: set[Labels] = set()
    bucket, total, count = f"{target}_bucket", f"{target}_sum", f"{target}_count"
    prefix_len = len(fam.name)
    for s in fam.samples:
        suffix = s.name[prefix_len:]
        if suffix == "_bucket":
            labels = s.labels if scale == 1.0 else _scale_le(s.labels, scale)
            if labels is None:
                continue
            if ("le", "+Inf") in labels:
                has_inf.add(tuple(kv for kv in labels if kv[0] != "le"))
            samples.append(Sample(bucket, labels, s.value))
        elif suffix == "_sum":
            samples.append(Sample(total, s.labels, s.value * scale))
        elif suffix == "_count":
            samples.append(Sample(count, s.labels, s.value))
    for s in [s for s in samples if s.name == count and s.labels not in has_inf]:
        samples.append(Sample(bucket, tuple(sorted((*s.labels, ("le", "+Inf")))), s.value))
    return Family(target, MetricType.HISTOGRAM, tuple(samples), CANONICAL[target].description)


def _scale_le(labels: Labels, scale: float) -> Labels | None:
    out = []
    for k, v in labels:
        if k == "le":
            try:
                bound = float(v)
            except ValueError:
                return None
            v = format_le(bound * scale)
        out.append((k, v))
    return tuple(out)


def format_le(bound: float) -> str:
    """A bucket bound as Prometheus writes it (``+Inf``, ``0.5``, ``10.0``)."""
    if bound == float("inf"):
        return "+Inf"
    return repr(float(bound))


def gauge(name: str, labels: Labels, value: float) -> Family:
    """A one-sample canonical gauge family."""
    return Family(
        name, MetricType.GAUGE, (Sample(name, labels, value),), CANONICAL[name].description
    )
