"""``slotune agent`` scraping real vLLM: every family lands in the store, and the summary over
a window equals what vLLM's own counters and histograms grew by in that window."""

from __future__ import annotations

from pathlib import Path

import pytest
from _vllm import SERVED_MODEL_NAME
from real_vllm_helpers import delta, measured_window
from sqlalchemy import create_engine, text

from slotune.collector.bench import ArrivalSpec, BenchConfig
from slotune.collector.metrics.summary import summarize_metrics
from slotune.collector.store import bucket_quantile, open_store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NUM_REQUESTS = 16
OUTPUT_TOKENS = 24
# The families the agent maps onto canonical names (collector/agent/vllm.py), by real name.
CANONICAL = {
    "vllm:time_to_first_token_seconds": "ttft_bucket",
    "vllm:inter_token_latency_seconds": "itl_bucket",
    "vllm:request_time_per_output_token_seconds": "tpot_bucket",
    "vllm:e2e_request_latency_seconds": "e2e_bucket",
    "vllm:request_queue_time_seconds": "queue_time_bucket",
    "vllm:request_prefill_time_seconds": "prefill_time_bucket",
    "vllm:request_decode_time_seconds": "decode_time_bucket",
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:prefix_cache_queries": "prefix_queries",
    "vllm:prefix_cache_hits": "prefix_hits",
    "vllm:num_preemptions": "preemptions",
    "vllm:prompt_tokens": "prompt_tokens",
    "vllm:generation_tokens": "generation_tokens",
    "vllm:request_success": "requests_finished",
}


def stored_series_names(db: str) -> set[str]:
    engine = create_engine(db)
    try:
        with engine.connect() as conn:
            return {row[0] for row in conn.execute(text("SELECT DISTINCT name FROM metric_series"))}
    finally:
        engine.dispose()


def test_agent_stores_every_family_and_summarizes_the_window_as_vllm_counts(
    real_vllm: str, tmp_path: Path
) -> None:
    w = measured_window(
        real_vllm,
        tmp_path,
        BenchConfig(
            url=real_vllm,
            arrival=ArrivalSpec.from_rate(8.0),
            input_len="48",
            output_len=str(OUTPUT_TOKENS),
            # longer than two of the CPU build's 128-token blocks, so the prefix cache hits
            shared_prefix_tokens=300,
            num_requests=NUM_REQUESTS,
            seed=5,
            timeout_s=300,
        ),
    )
    before, after = w.before, w.after
    assert len(w.result.records) == NUM_REQUESTS

    # every family real vLLM serves is in the store: raw under its own sample names, and the
    # mapped ones under their canonical names too
    stored = stored_series_names(w.db)
    raw = {name for name, _ in after.samples if not name.endswith("_created")}
    assert raw - stored == set()
    assert {f for f in after.family_types if f.startswith("vllm:")} >= set(CANONICAL)
    assert set(CANONICAL.values()) - stored == set()

    window = w.end - w.start
    with open_store(w.db) as store:
        (summary,) = summarize_metrics(store, window_s=window, end_ts=w.end)
    assert summary.model == SERVED_MODEL_NAME and summary.is_up is True
    finished = delta(after, before, "vllm:request_success_total")
    assert finished == NUM_REQUESTS
    assert summary.request_throughput == pytest.approx(finished / window)
    out_tokens = delta(after, before, "vllm:generation_tokens_total")
    assert out_tokens == NUM_REQUESTS * OUTPUT_TOKENS
    assert summary.output_token_throughput == pytest.approx(out_tokens / window)
    assert summary.input_token_throughput == pytest.approx(
        delta(after, before, "vllm:prompt_tokens_total") / window
    )
    hits = delta(after, before, "vllm:prefix_cache_hits_total")
    queries = delta(after, before, "vllm:prefix_cache_queries_total")
    assert hits > 0
    assert summary.prefix_hit_rate == pytest.approx(hits / queries)
    figures = summary.to_dict()
    for canonical, family in (
        ("ttft", "vllm:time_to_first_token_seconds"),
        ("itl", "vllm:inter_token_latency_seconds"),
        ("tpot", "vllm:request_time_per_output_token_seconds"),
        ("e2e", "vllm:e2e_request_latency_seconds"),
    ):
        grown = [
            (le, n - n0)
            for (le, n), (_, n0) in zip(after.buckets(family), before.buckets(family), strict=True)
        ]
        for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            expected = bucket_quantile(q, grown)
            assert expected is not None
            assert figures[f"{canonical}_ms"][key] == pytest.approx(expected * 1000.0), canonical
