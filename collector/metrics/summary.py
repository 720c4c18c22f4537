"""``slotune metrics summary``: what each target's canonical series say over a window, from
the store or a query API (:mod:`collector.metrics`).

Percentiles come from histogram *bucket increases* over the window (reset-aware, linear
inside a bucket, like Prometheus' ``histogram_quantile``), so they describe the requests that
finished in the window, not everything since the engine started. Throughputs are counter
increases divided by the window; queue length and VRAM are the newest values (summed over
engines / GPUs of the target); KV usage, GPU utilisation and power are averages over the
window.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from slotune.collector.errors import ConfigError
from slotune.collector.metrics._client import PromClient
from slotune.collector.metrics._reader import MetricsReader, metrics_reader
from slotune.collector.store import Store, TargetInfo, bucket_quantile

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
LATENCIES = ("ttft", "itl", "tpot", "e2e")


@dataclass(frozen=True, slots=True)
class TargetMetricsSummary:
    """One target over one window. None: the target does not expose that metric (or the
    window holds no data for it). Latencies are in milliseconds, keyed p50/p90/p99."""

    target: str
    kind: str
    node: str | None
    model: str | None
    window_s: float
    end_ts: float
    is_up: bool | None
    ttft_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    tpot_ms: dict[str, float | None]
    e2e_ms: dict[str, float | None]
    request_throughput: float | None
    output_token_throughput: float | None
    input_token_throughput: float | None
    requests_running: float | None
    requests_waiting: float | None
    kv_usage: float | None
    prefix_hit_rate: float | None
    preemption_rate: float | None
    vram_used_bytes: float | None
    vram_total_bytes: float | None
    gpu_utilization: float | None
    power_watts: float | None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict (the ``--json`` output, one per target)."""
        return asdict(self)


def summarize_metrics(
    store: Store,
    *,
    target: str | None = None,
    window_s: float = 300.0,
    end_ts: float | None = None,
    metrics: PromClient | None = None,
) -> list[TargetMetricsSummary]:
    """Summaries of every target (or one) over ``[end_ts - window_s, end_ts]``.

    Args:
        store: the open store.
        target: one target's name; None for all.
        window_s: window length in seconds.
        end_ts: window end (epoch seconds); None for now.
        metrics: read the targets from this query API (``--metrics``) instead of the store.

    Returns:
        One summary per target, by name.

    Raises:
        ConfigError: ``target`` is not registered, or the window is not positive.
        MetricsUnavailable: ``metrics`` cannot be read.
    """
    if window_s <= 0:
        raise ConfigError(f"--window must be positive, got {window_s:g} s")
    end = time.time() if end_ts is None else end_ts
    reader = metrics_reader(store, metrics)
    targets = reader.targets(end)
    if target is not None:
        targets = [t for t in targets if t.name == target]
        if not targets:
            raise ConfigError(f"no target named {target!r}; see `slotune targets list`")
    return [_summarize(reader, t, end - window_s, end) for t in targets]


def _summarize(
    reader: MetricsReader, t: TargetInfo, start: float, end: float
) -> TargetMetricsSummary:
    name = t.name

    def quantiles(family: str) -> dict[str, float | None]:
        buckets = sorted(reader.bucket_increases(name, family, start, end).items())
        out: dict[str, float | None] = {}
        for key, q in QUANTILES.items():
            v = bucket_quantile(q, buckets)
            out[key] = None if v is None else v * 1000.0
        return out

    def rate(series: str) -> float | None:
        increase = reader.increase(name, series, start, end)
        return None if increase is None else increase / (end - start)

    def latest(series: str) -> float | None:
        return reader.latest(name, series, end)

    up = latest("up")
    requests = rate("e2e_count")
    return TargetMetricsSummary(
        target=name,
        kind=t.kind,
        node=t.node,
        model=t.model,
        window_s=end - start,
        end_ts=end,
        is_up=None if up is None else up >= 1.0,
        ttft_ms=quantiles("ttft"),
        itl_ms=quantiles("itl"),
        tpot_ms=quantiles("tpot"),
        e2e_ms=quantiles("e2e"),
        request_throughput=requests if requests is not None else rate("requests_finished"),
        output_token_throughput=rate("generation_tokens"),
        input_token_throughput=rate("prompt_tokens"),
        requests_running=latest("requests_running"),
        requests_waiting=latest("requests_waiting"),
        kv_usage=reader.gauge_avg(name, "kv_usage", start, end),
        prefix_hit_rate=_prefix_hit_rate(reader, name, start, end),
        preemption_rate=rate("preemptions"),
        vram_used_bytes=latest("vram_used"),
        vram_total_bytes=latest("vram_total"),
        gpu_utilization=reader.gauge_avg(name, "gpu_utilization", start, end),
        power_watts=reader.gauge_avg(name, "power_watts", start, end),
    )


def _prefix_hit_rate(reader: MetricsReader, target: str, start: float, end: float) -> float | None:
    queries = reader.increase(target, "prefix_queries", start, end)
    hits = reader.increase(target, "prefix_hits", start, end)
    if queries and hits is not None:
        return hits / queries
    return reader.gauge_avg(target, "prefix_hit_rate", start, end)
