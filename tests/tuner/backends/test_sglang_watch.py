"""SGLang's ``/metrics`` watched over a run: its own gauges and counters, as run deltas."""

from __future__ import annotations

import re

from _sglang_server import METRICS_DUMP, SglangServer, serving

from slotune.tuner.tune.backends.watch import MetricsWatch


def moved(metrics: str, changes: dict[str, float]) -> str:
    """``metrics`` with the first sample of each named series set to a new value."""
    for name, value in changes.items():
        metrics, n = re.subn(
            rf"^({re.escape(name)}\{{[^}}]*\}}) \S+$",
            rf"\g<1> {value}",
            metrics,
            count=1,
            flags=re.M,
        )
        assert n == 1, name
    return metrics


def test_a_runs_figures_come_from_sglangs_names_and_are_its_own_deltas() -> None:
    with serving(SglangServer()) as server:
        watch = MetricsWatch("sglang", server.url, interval_s=0.05)
        with watch.during() as watched:
            # What SGLang 0.5.23 exports after serving more requests: the first label set of
            # each counter moves (the dump's lifetime figures stay in the others).
            server.metrics = moved(
                server.metrics,
                {
                    "sglang:prompt_tokens_total": 107.0,
                    "sglang:cached_tokens_total": 44.0,
                    "sglang:num_requests_total": 6.0,
                    "sglang:token_usage": 0.62,
                    "sglang:num_queue_reqs": 3.0,
                    "sglang:num_running_reqs": 8.0,
                },
            )
    run = watched[0]
    # prompt tokens 7 -> 107, cached 4 -> 44, requests 1 -> 6, over this run only.
    assert run.deltas["prefix_queries"] == 100.0
    assert run.deltas["prefix_hits"] == 40.0
    assert run.prefix_hit_rate == 0.4
    assert run.deltas["requests_finished"] == 5.0
    assert run.kv_usage_max == 0.62
    assert run.waiting_max == 3.0 and run.running_max == 8.0
    # No retraction yet (SGLang creates that counter's series at the first): no figure.
    assert "preemptions" not in run.deltas
    assert run.errors == ()


def test_a_counter_sglang_creates_during_the_run_counts_from_zero() -> None:
    # SGLang exports sglang:cached_tokens_total from its first cached prompt token on.
    never_hit = "\n".join(
        line for line in METRICS_DUMP.read_text().splitlines() if "cached_tokens" not in line
    )
    with (
        serving(SglangServer(metrics=never_hit)) as server,
        MetricsWatch("sglang", server.url, interval_s=0.05).during() as watched,
    ):
        server.metrics = METRICS_DUMP.read_text()  # 4 cached tokens, 14 prompt tokens
    assert watched[0].deltas["prefix_hits"] == 4.0
    assert watched[0].deltas["prefix_queries"] == 0.0
