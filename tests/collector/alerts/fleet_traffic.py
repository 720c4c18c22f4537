"""One traffic, two paths: engine expositions a Prometheus would scrape once a minute, as a
``/federate`` body per minute (read by the agent's own sources into the store) and as an
OpenMetrics file (backfilled into a real Prometheus with promtool)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from slotune.collector.agent.base import Response
from slotune.collector.agent.encode import SampleEncoder
from slotune.collector.agent.federate import FederateSource
from slotune.collector.store import Store, register_target, write_samples

STEP_S = 60.0
MINUTES = 180
VLLM = ("vllm", "127.0.0.1:8000")
SGLANG = ("sglang", "127.0.0.1:30000")
# whole hours, a few hours back, so the blocks sit outside Prometheus' head
BASE_TS = (int(time.time()) // 3600 - 6) * 3600.0
AT_TS = BASE_TS + MINUTES * STEP_S  # the end of the traffic
RESTART_MINUTE = 100  # the vLLM server restarts: its counters start again from zero

# canonical family -> (vLLM histogram, bounds in s, fast share, slow share before/after 150 min)
_HISTOGRAMS = {
    "ttft": ("vllm:time_to_first_token_seconds", (0.1, 0.5, 1.0)),
    "itl": ("vllm:inter_token_latency_seconds", (0.025, 0.05, 0.1)),
    "tpot": ("vllm:request_time_per_output_token_seconds", (0.025, 0.05, 0.1)),
    "e2e": ("vllm:e2e_request_latency_seconds", (1.0, 5.0, 10.0)),
}


def _per_minute(minute: int) -> dict[str, float]:
    """Requests per bucket index (0, 1, 2, above) and finished reasons in one minute."""
    slow = 0.02 if minute < 150 else 0.3
    return {
        "b0": 60.0 * (1 - slow),
        "b1": 30.0 * (1 - slow),
        "b2": 10.0 * (1 - slow) + 50.0 * slow,
        "inf": 50.0 * slow,
        "stop": 95.0,
        "length": 4.0,
        "abort": 1.0 if minute < 150 else 20.0,
    }


def cumulative() -> Iterator[tuple[float, dict[str, float], dict[str, float]]]:
    """(seconds from the start, vLLM cumulative counts, SGLang cumulative counts)."""
    vllm = dict.fromkeys(_per_minute(0), 0.0)
    sglang = dict.fromkeys(_per_minute(0), 0.0)
    for minute in range(MINUTES + 1):
        if minute == RESTART_MINUTE:
            vllm = dict.fromkeys(vllm, 0.0)
        gauges = {"kv": 0.2 + 0.5 * (minute % 10) / 10, "running": float(minute % 7)}
        yield minute * STEP_S, {**vllm, **gauges}, dict(sglang)
        for key, v in _per_minute(minute).items():
            vllm[key] += v
            sglang[key] += v * 0.5


def _lines(vllm: dict[str, float], sglang: dict[str, float], sglang_prefix: str) -> list[str]:
    """Samples as ``name{labels} value`` (no timestamps), each family after its TYPE line."""
    out = []
    job, inst = VLLM
    ids = f'job="{job}",instance="{inst}",model_name="m"'
    for family, bounds in _HISTOGRAMS.values():
        out.append(f"# TYPE {family} histogram")
        running = 0.0
        for le, key in zip((*bounds, "+Inf"), ("b0", "b1", "b2", "inf"), strict=True):
            running += vllm[key]
            out.append(f'{family}_bucket{{{ids},le="{le}"}} {running:g}')
        out.append(f"{family}_count{{{ids}}} {running:g}")
    out.append("# TYPE vllm:kv_cache_usage_perc gauge")
    out.append(f"vllm:kv_cache_usage_perc{{{ids}}} {vllm['kv']:g}")
    out.append("# TYPE vllm:num_requests_running gauge")
    out.append(f"vllm:num_requests_running{{{ids}}} {vllm['running']:g}")
    out.append("# TYPE vllm:num_requests_waiting gauge")
    out.append(f"vllm:num_requests_waiting{{{ids}}} {vllm['running'] / 2:g}")
    for counter, key in (("num_preemptions", "abort"), ("prefix_cache_queries", "stop")):
        out.append(f"# TYPE vllm:{counter}_total counter")
        out.append(f"vllm:{counter}_total{{{ids}}} {vllm[key]:g}")
    out.append("# TYPE vllm:prefix_cache_hits_total counter")
    out.append(f"vllm:prefix_cache_hits_total{{{ids}}} {vllm['length']:g}")
    out.append("# TYPE vllm:request_success_total counter")
    for reason in ("stop", "length", "abort"):
        out.append(
            f'vllm:request_success_total{{{ids},finished_reason="{reason}"}} {vllm[reason]:g}'
        )
    job, inst = SGLANG
    ids = f'job="{job}",instance="{inst}",model_name="m"'
    out.append(f"# TYPE {sglang_prefix}time_to_first_token_seconds histogram")
    running = 0.0
    for le, key in zip(("0.1", "0.5", "1.0", "+Inf"), ("b0", "b1", "b2", "inf"), strict=True):
        running += sglang[key]
        name = f"{sglang_prefix}time_to_first_token_seconds_bucket"
        out.append(f'{name}{{{ids},le="{le}"}} {running:g}')
    finished = sglang["stop"] + sglang["length"]
    out.append(f"# TYPE {sglang_prefix}num_requests_total counter")
    out.append(f"{sglang_prefix}num_requests_total{{{ids}}} {finished:g}")
    out.append(f"# TYPE {sglang_prefix}num_aborted_requests_total counter")
    out.append(f"{sglang_prefix}num_aborted_requests_total{{{ids}}} {sglang['abort']:g}")
    return out


def fill_store(store: Store, base_ts: float) -> None:
    """The traffic through the agent's ``/federate`` reading into the store."""
    for job, inst in (VLLM, SGLANG):
        register_target(store, f"{job}/{inst}", job, "")
    source = FederateSource(["http://prometheus/federate"])
    encoder = SampleEncoder()
    for t, vllm, sglang in cumulative():
        body = "\n".join(_lines(vllm, sglang, "sglang:")) + "\n"
        scrape = source.read([("http://prometheus/federate", Response(body, "text/plain"))])
        batch = [s for p in scrape.parts for s in encoder.encode(p.target, p.scrape, base_ts + t)]
        write_samples(store, batch)


def write_openmetrics(path: Path, base_ts: float) -> None:
    """The traffic as Prometheus' TSDB blocks, SGLang in its ``sglang_`` spelling."""
    by_series: dict[str, list[str]] = {}
    for t, vllm, sglang in cumulative():
        for line in _lines(vllm, sglang, "sglang_"):
            if line.startswith("#"):
                continue
            series, value = line.rsplit(" ", 1)
            by_series.setdefault(series, []).append(f"{series} {value} {base_ts + t:.0f}")
    families: dict[str, list[str]] = {}
    for series, lines in by_series.items():
        families.setdefault(series.split("{", 1)[0], []).extend(lines)
    text = [line for name, lines in families.items() for line in (f"# TYPE {name} unknown", *lines)]
    path.write_text("\n".join([*text, "# EOF", ""]))
