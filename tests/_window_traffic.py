"""One engine target's traffic for ``sim calibrate --target``, two paths: requests served by
the simulated engine on a GPU whose true step terms the calibration does not know, exposed
as vLLM's ``/metrics`` once every ``STEP_S``, read as a ``/federate`` body per scrape by the
agent's own sources into the store, and written as an OpenMetrics file for a real Prometheus
(backfilled with promtool)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from slotune.collector.agent.base import Response
from slotune.collector.agent.encode import SampleEncoder
from slotune.collector.agent.federate import FederateSource
from slotune.collector.engine_buckets import VLLM_TOKEN_LATENCY_BUCKETS_S, VLLM_TTFT_BUCKETS_S
from slotune.collector.observed import observed_lines
from slotune.collector.store import Store, register_target, write_samples
from slotune.collector.workload import retime
from slotune.collector.workload.synthetic import Column, parse_length_spec, synthetic_trace
from slotune.tuner.emulate.vllm_metrics import build_1_2_5_buckets
from slotune.tuner.sim import VllmConfig
from slotune.tuner.sim.catalog import Efficiency, StepTerms
from slotune.tuner.sim.config import resolve
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.simulator import replay

MODEL, GPU = "llama-3.1-8b", "h100-sxm"
JOB, INSTANCE = "vllm", "127.0.0.1:8000"
TARGET = f"{JOB}/{INSTANCE}"
STEP_S = 30.0
# whole hours, a few hours back, so Prometheus' blocks sit outside its head
BASE_TS = (int(time.time()) // 3600 - 6) * 3600.0
# The GPU's true step terms: host time per step, per prompt token and per decoding sequence.
HIDDEN = Efficiency(step_terms=StepTerms(step_s=2e-3, prefill_token_s=20e-6, decode_seq_s=1e-4))
_MAX_MODEL_LEN = 8192


def served(efficiency: Efficiency, num_requests: int, rate: float) -> list[dict[str, Any]]:
    """Requests served at ``rate`` by the simulated engine on a GPU with ``efficiency``
    (measured-requests lines: timestamp, lengths, ttft_ms, e2e_ms, tpot_ms)."""
    config = resolve(VllmConfig(model=MODEL, gpu=GPU))
    trace = synthetic_trace(
        parse_length_spec("lognormal:6.5,0.8"),
        parse_length_spec("lognormal:5.0,0.7", column=Column.OUTPUT, field_name="--output-len"),
        num_requests,
        seed=1,
    )
    real = dataclasses.replace(config, gpu=dataclasses.replace(config.gpu, efficiency=efficiency))
    records = replay(EngineCore.create(real), retime(trace, rate=rate, seed=1)).records
    return list(observed_lines(records))


def expositions(lines: Sequence[dict[str, Any]]) -> Iterator[tuple[float, str]]:
    """(seconds from the start, vLLM's exposition then): one scrape every ``STEP_S`` until
    every request has finished; a request is observed when it finishes, as vLLM does (its
    TPOT is 0 with one output token, as vLLM's is)."""
    registry = CollectorRegistry()
    names = ("job", "instance", "model_name")
    ids = (JOB, INSTANCE, MODEL)

    def histogram(name: str, buckets: Sequence[float]) -> Any:
        return Histogram(name, name, names, registry=registry, buckets=buckets).labels(*ids)

    ttft = histogram("vllm:time_to_first_token_seconds", VLLM_TTFT_BUCKETS_S)
    tpot = histogram("vllm:request_time_per_output_token_seconds", VLLM_TOKEN_LATENCY_BUCKETS_S)
    itl = histogram("vllm:inter_token_latency_seconds", VLLM_TOKEN_LATENCY_BUCKETS_S)
    token_buckets = [float(b) for b in build_1_2_5_buckets(_MAX_MODEL_LEN)]
    prompt = histogram("vllm:request_prompt_tokens", token_buckets)
    generation = histogram("vllm:request_generation_tokens", token_buckets)
    success = Counter(
        "vllm:request_success", "finished", (*names, "finished_reason"), registry=registry
    ).labels(*ids, "stop")
    finishes = sorted(
        ((d["timestamp"] + d["e2e_ms"] / 1000.0, d) for d in lines), key=lambda x: x[0]
    )
    at, i = 0.0, 0
    while True:
        while i < len(finishes) and finishes[i][0] <= at:
            d = finishes[i][1]
            ttft.observe(d["ttft_ms"] / 1000.0)
            tpot.observe(d.get("tpot_ms", 0.0) / 1000.0)
            for _ in range(d["output_tokens"] - 1):  # its gaps, each taken as its mean
                itl.observe(d["tpot_ms"] / 1000.0)
            prompt.observe(d["input_tokens"])
            generation.observe(d["output_tokens"])
            success.inc()
            i += 1
        text = generate_latest(registry).decode()
        yield at, "\n".join(x for x in text.splitlines() if "_created" not in x) + "\n"
        if i == len(finishes):
            return
        at += STEP_S


def fill_store(
    store: Store,
    lines: Sequence[dict[str, Any]],
    base_ts: float = BASE_TS,
    *,
    leave_out: Sequence[str] = (),
) -> None:
    """The traffic through the agent's ``/federate`` reading into the store, less the
    families named in ``leave_out``."""
    register_target(store, TARGET, JOB, "")
    source = FederateSource(["http://prometheus/federate"])
    encoder = SampleEncoder()
    for t, text in expositions(lines):
        body = "".join(x + "\n" for x in text.splitlines() if not any(f in x for f in leave_out))
        scrape = source.read([("http://prometheus/federate", Response(body, "text/plain"))])
        write_samples(
            store,
            [s for p in scrape.parts for s in encoder.encode(p.target, p.scrape, base_ts + t)],
        )


def write_openmetrics(
    path: Path, lines: Sequence[dict[str, Any]], base_ts: float = BASE_TS
) -> None:
    """The traffic as an OpenMetrics file with timestamps, for ``promtool tsdb
    create-blocks-from openmetrics``."""
    by_series: dict[str, list[str]] = {}
    for t, body in expositions(lines):
        for line in body.splitlines():
            if line and not line.startswith("#"):
                series, value = line.rsplit(" ", 1)
                by_series.setdefault(series, []).append(f"{series} {value} {base_ts + t:.0f}")
    families: dict[str, list[str]] = {}
    for series, got in by_series.items():
        families.setdefault(series.split("{", 1)[0], []).extend(got)
    text = [x for name, got in families.items() for x in (f"# TYPE {name} unknown", *got)]
    path.write_text("\n".join([*text, "# EOF", ""]), encoding="utf-8")


def end_ts(lines: Sequence[dict[str, Any]], base_ts: float = BASE_TS) -> float:
    """The last scrape's time (when every request had finished)."""
    last = max(d["timestamp"] + d["e2e_ms"] / 1000.0 for d in lines)
    return base_ts + math.ceil(last / STEP_S) * STEP_S
