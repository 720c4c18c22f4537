"""A small store with a bit of everything the dashboard shows (shared by the page tests)."""

from __future__ import annotations

import time

from slotune.collector.alerts.rules import parse_rule
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.records import RequestRecord
from slotune.collector.slo import parse_slo_yaml
from slotune.collector.store import (
    AlertEventInfo,
    AlertState,
    BenchRunMeta,
    SampleIn,
    open_store,
    record_alert_event,
    register_target,
    save_alert_rule,
    save_bench_run,
    save_diagnosis,
    upgrade,
    write_samples,
)
from slotune.collector.summary import summarize

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, float("inf"))
TARGETS = (
    ("node-1/vllm", "chat", "node-1"),
    ("node-2/vllm", "chat", "node-2"),
    ("node-3/vllm", "code", "node-3"),
)
SLOS_YAML = """
slos:
  - name: chat-ttft
    spec: ttft:p99<=500ms
    selector: {pool: chat}
  - name: code-e2e
    spec: e2e:p90<=1s
    selector: {pool: code}
"""


def _le(b: float) -> str:
    return "+Inf" if b == float("inf") else repr(b)


def _fleet_samples(name: str, slow: bool, start: float, steps: int) -> list[SampleIn]:
    out: list[SampleIn] = []
    hist = "histogram"
    for i in range(steps + 1):
        ts = start + 5.0 * i
        n = 10.0 * i  # ten requests per scrape
        # slow targets finish 70 % of requests within 0.5 s and 85 % within 1 s; fast 99.5 %.
        share = 0.7 if slow else 0.995
        for fam in ("ttft", "e2e", "itl", "tpot"):
            for b in BUCKETS:
                if b <= 0.5:
                    frac = share * min(b / 0.25, 1.0)
                else:
                    frac = 1.0 if b == float("inf") else share + (1 - share) / 2
                out.append(SampleIn(name, f"{fam}_bucket", hist, {"le": _le(b)}, ts, n * frac))
            out.append(SampleIn(name, f"{fam}_count", hist, {}, ts, n))
            out.append(SampleIn(name, f"{fam}_sum", hist, {}, ts, n * 0.2))
        out += [
            SampleIn(name, "generation_tokens", "counter", {}, ts, 2000.0 * i),
            SampleIn(name, "prompt_tokens", "counter", {}, ts, 5000.0 * i),
            SampleIn(name, "preemptions", "counter", {}, ts, 0.5 * i),
            SampleIn(name, "requests_finished", "counter", {"finished_reason": "stop"}, ts, n),
            SampleIn(name, "requests_running", "gauge", {}, ts, 12.0),
            SampleIn(name, "requests_waiting", "gauge", {}, ts, 3.0 if slow else 0.0),
            SampleIn(name, "kv_usage", "gauge", {}, ts, 0.6),
            SampleIn(name, "prefix_hit_rate", "gauge", {}, ts, 0.4),
            SampleIn(name, "vram_used", "gauge", {"gpu": "0"}, ts, 70 * 1024**3),
            SampleIn(name, "gpu_utilization", "gauge", {"gpu": "0"}, ts, 0.8),
            SampleIn(name, "power_watts", "gauge", {"gpu": "0"}, ts, 550.0),
            SampleIn(name, "up", "gauge", {}, ts, 1.0),
        ]
    return out


def _records(rate: float, n: int, slow: float) -> list[RequestRecord]:
    out = []
    for i in range(n):
        t0 = i / rate
        ttft = 0.05 + slow * (i % 10) / 10
        chunks = tuple(t0 + ttft + 0.02 * k for k in range(20))
        out.append(RequestRecord(f"r{i}", t0, chunks[0], chunks[-1], chunks, (1,) * 20, 100, 20))
    return out


def seed(url: str, *, minutes: int = 10) -> float:
    """Fill the store at ``url``; returns the time the samples end (now)."""
    upgrade(url)
    now = time.time()
    with open_store(url) as store:
        for name, pool, node in TARGETS:
            register_target(
                store,
                name,
                "vllm",
                f"http://{node}:8000/metrics",
                {"pool": pool, "node": node, "model": "llama-3.1-8b", "gpu": "H100-SXM"},
            )
        steps = minutes * 12
        for name, pool, _ in TARGETS:
            write_samples(store, _fleet_samples(name, pool == "code", now - 5.0 * steps, steps))
        slos = parse_slo_yaml(SLOS_YAML)
        apply_slos(store, slos)  # the SLOs and their burn-rate rules, as `slo apply` does
        save_alert_rule(store, parse_rule("kv_usage > 0.9 for 5m", name="kv-full").to_info())
        record_alert_event(
            store,
            AlertEventInfo(
                "chat-ttft:page", AlertState.FIRING, now - 60, 15.0, {}, "burn rate 15x over 1h"
            ),
        )
        record_alert_event(  # still firing: the one event that can be acknowledged
            store,
            AlertEventInfo(
                "code-e2e:ticket", AlertState.FIRING, now - 30, 1.5, {}, "burn rate 1.5x over 3d"
            ),
        )
        records = _records(5.0, 40, 0.3)
        save_bench_run(
            store,
            BenchRunMeta(
                "baseline",
                "http://127.0.0.1:8000",
                "llama-3.1-8b",
                "azure-conv",
                now - 600,
                now - 590,
                {"arrival": {"kind": "poisson", "rate": 5.0}},
            ),
            records,
            summarize(records, slos).to_dict(),
        )
        for rate, slow in ((2.0, 0.1), (4.0, 0.3), (8.0, 0.9)):
            recs = _records(rate, 30, slow)
            save_bench_run(
                store,
                BenchRunMeta(
                    "llama poisson (max-rate)",
                    "http://127.0.0.1:8000",
                    "llama-3.1-8b",
                    "azure-conv",
                    now - 500 + rate,
                    None,
                    {"arrival": {"kind": "poisson", "rate": rate}},
                ),
                recs,
                summarize(recs, [slos[0]]).to_dict(),
            )
        save_diagnosis(
            store,
            "prefix-cache",
            {"workload": "azure-conv"},
            {"verdict": "prefix caching helps: 41 % of prompt tokens repeat"},
            subject="azure-conv",
        )
    return now
