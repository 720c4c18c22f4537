"""TensorRT-LLM (``trtllm-serve``): ``/metrics`` JSON iteration stats and ``/prometheus/metrics``.

``/metrics`` returns the iteration statistics queued since the previous GET and *drains* the
queue: whatever one GET returned no later GET returns again. So every element is read, and
what they add up to is kept by this source (one instance per target): the number of engine
iterations and a histogram of ``iterLatencyMS`` are agent-side cumulative series. Gauges
(running requests, KV blocks, GPU memory) come from the newest element of each GET; a GET
that returns ``[]`` (idle engine) yields no gauge rather than a stale one.

``/prometheus/metrics`` serves ``trtllm_``-prefixed names; releases before the prefix wrote
the same names without it (``request_success_total``, ``time_to_first_token_seconds`` ...).
Which body is which is decided by its content, so an explicit URL works for either.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from typing import Any

from slotune.collector.agent.base import (
    Family,
    MetricType,
    Response,
    Sample,
    Scrape,
    SkippedLine,
    SourceKind,
)
from slotune.collector.agent.budget import current_deadline
from slotune.collector.agent.canonical import CANONICAL, RequestOutcomes, Rule, format_le, gauge
from slotune.collector.agent.promsource import PromTextSource
from slotune.collector.errors import SourceError

_PROM_NAMES = (
    ("time_to_first_token_seconds", "ttft"),
    ("time_per_output_token_seconds", "tpot"),
    ("e2e_request_latency_seconds", "e2e"),
    ("request_queue_time_seconds", "queue_time"),
    ("request_success_total", "requests_finished"),
    ("kv_cache_utilization", "kv_usage"),
    ("kv_cache_hit_rate", "prefix_hit_rate"),
)
TRTLLM_RULES: tuple[Rule, ...] = tuple(
    Rule(prefix + name, target) for name, target in _PROM_NAMES for prefix in ("trtllm_", "")
)
ITERATION_LATENCY_BOUNDS_S = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
_JSON_PREFIX = "trtllm_json:"


def parse_iteration_stats(
    text: str, source: str = "response"
) -> tuple[list[dict[str, Any]], list[SkippedLine]]:
    """Parse a ``/metrics`` JSON body: a list of iteration-stat objects.

    Documentation excerpts elide fields with ``...`` lines; those lines are skipped one by
    one and reported, the rest must be JSON.

    Args:
        text: the body.
        source: where it came from, for error messages.

    Returns:
        The iteration-stat objects and the skipped lines.

    Raises:
        SourceError: the body is not a JSON list (or object) of iteration stats.
    """
    skipped: list[SkippedLine] = []
    try:
        data = json.loads(text)
    except RecursionError:
        raise SourceError(
            f"{source} nests JSON deeper than iteration stats ever do; point the target at "
            "trtllm-serve's /metrics or /prometheus/metrics"
        ) from None
    except ValueError:
        kept = []
        for line_no, line in enumerate(text.splitlines(), start=1):
            if line.strip() and line.strip().strip(".") == "":
                skipped.append(SkippedLine(line_no, line.strip(), "is an elision ('...')"))
            else:
                kept.append(line)
        try:
            data = json.loads("\n".join(kept))
        except (ValueError, RecursionError) as e:
            raise SourceError(
                f"{source} is not TensorRT-LLM iteration-stats JSON ({e}); point the target "
                "at trtllm-serve's /metrics or /prometheus/metrics"
            ) from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise SourceError(
            f"{source}: expected a JSON list of iteration stats, got "
            f"{type(data).__name__}; is this trtllm-serve's /metrics?"
        )
    return [e for e in data if isinstance(e, dict)], skipped


def _number(obj: Any, *path: str) -> float | None:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return _as_float(obj)


def _as_float(value: Any) -> float | None:
    """A JSON number as a float; None for anything else, or an integer past float's range."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # a 400-digit integer
        return None


# Iteration stats nest two or three levels (kvCacheStats, inflightBatchingStats); deeper
# objects are not stats and are not walked.
_MAX_DEPTH = 8


def _flatten(obj: dict[str, Any], prefix: str = "", depth: int = 0) -> Iterable[tuple[str, float]]:
    for key, value in obj.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            if depth < _MAX_DEPTH:
                yield from _flatten(value, path + ".", depth + 1)
        elif (number := _as_float(value)) is not None:
            yield path, number


class TrtllmSource(PromTextSource):
    """TensorRT-LLM's two endpoints; keeps the drained iteration stats' running totals."""

    kind = SourceKind.TRTLLM
    rules = TRTLLM_RULES
    outcomes = RequestOutcomes("trtllm_request_success_total")

    def __init__(self, urls: Iterable[str] = ()) -> None:
        super().__init__(urls)
        self._iterations = 0
        self._latency_counts = [0] * (len(ITERATION_LATENCY_BOUNDS_S) + 1)
        self._latency_sum_s = 0.0

    def read(self, responses: list[tuple[str, Response]]) -> Scrape:
        deadline = current_deadline()
        with self._lock:
            raw: list[Family] = []
            skipped: list[SkippedLine] = []
            elements: list[dict[str, Any]] = []
            has_stats = False
            for url, resp in responses:
                if resp.text.lstrip()[:1] in ("[", "{"):
                    got, sk = parse_iteration_stats(resp.text, url)
                    elements.extend(got)
                    has_stats = True
                else:
                    parsed = self.parsers[url].parse(
                        resp.text, content_type=resp.content_type, source=url, deadline=deadline
                    )
                    raw.extend(parsed.families)
                    sk = list(parsed.skipped)
                skipped.extend(sk)
            scrape = self.from_families(raw, skipped)
            if not has_stats:
                return scrape
            json_raw, json_canonical = self.from_iteration_stats(elements)
            return Scrape(scrape.raw + json_raw, scrape.canonical + json_canonical, scrape.skipped)

    def from_iteration_stats(
        self, elements: list[dict[str, Any]]
    ) -> tuple[tuple[Family, ...], tuple[Family, ...]]:
        """Fold drained iteration stats into the running totals; return raw and canonical."""
        for elem in elements:
            self._iterations += 1
            latency_ms = _number(elem, "iterLatencyMS")
            if latency_ms is not None:
                latency_s = latency_ms / 1000.0
                self._latency_sum_s += latency_s
                self._latency_counts[bisect.bisect_left(ITERATION_LATENCY_BOUNDS_S, latency_s)] += 1
        canonical = [self._totals(), _iteration_counter(self._iterations)]
        raw: list[Family] = []
        if elements:
            latest = elements[-1]
            raw = [
                Family(
                    _JSON_PREFIX + path, MetricType.GAUGE, (Sample(_JSON_PREFIX + path, (), value),)
                )
                for path, value in _flatten(latest)
            ]
            canonical.extend(_latest_gauges(latest))
        return tuple(raw), tuple(canonical)

    def _totals(self) -> Family:
        samples, cumulative = [], 0
        for bound, count in zip(
            (*ITERATION_LATENCY_BOUNDS_S, float("inf")), self._latency_counts, strict=True
        ):
            cumulative += count
            samples.append(
                Sample("iteration_latency_bucket", (("le", format_le(bound)),), float(cumulative))
            )
        samples.append(Sample("iteration_latency_sum", (), self._latency_sum_s))
        samples.append(Sample("iteration_latency_count", (), float(cumulative)))
        return Family(
            "iteration_latency",
            MetricType.HISTOGRAM,
            tuple(samples),
            CANONICAL["iteration_latency"].description,
        )


def _iteration_counter(iterations: int) -> Family:
    return Family(
        "iterations",
        MetricType.COUNTER,
        (Sample("iterations", (), float(iterations)),),
        CANONICAL["iterations"].description,
    )


def _latest_gauges(elem: dict[str, Any]) -> list[Family]:
    out: list[Family] = []
    values = {
        "requests_running": _number(elem, "numActiveRequests"),
        "requests_waiting": _number(elem, "numQueuedRequests"),
        "vram_used": _number(elem, "gpuMemUsage"),
        "prefix_hit_rate": _number(elem, "kvCacheStats", "cacheHitRate"),
    }
    used = _number(elem, "kvCacheStats", "usedNumBlocks")
    total = _number(elem, "kvCacheStats", "maxNumBlocks")
    if used is not None and total:
        values["kv_usage"] = used / total
    out.extend(gauge(name, (), v) for name, v in values.items() if v is not None)
    reused = _number(elem, "kvCacheStats", "reusedBlocks")
    missed = _number(elem, "kvCacheStats", "missedBlocks")
    if reused is not None and missed is not None:
        # Both are running totals in the engine, so they are counters here too.
        for name, value in (("prefix_hits", reused), ("prefix_queries", reused + missed)):
            out.append(
                Family(
                    name,
                    MetricType.COUNTER,
                    (Sample(name, (), value),),
                    CANONICAL[name].description,
                )
            )
    return out
