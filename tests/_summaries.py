"""A run summary with literal figures, for tests that need one without running requests."""

from dataclasses import replace
from typing import Any

from slotune.collector.summary import Distribution, Summary

NO_LATENCY = Distribution.of([])


def run_summary(latency: Distribution = NO_LATENCY, **changes: Any) -> Summary:
    """A 10-request, 5-second run with every latency ``latency``; ``changes`` set fields."""
    base = Summary(
        duration_s=5.0,
        num_requests=10,
        num_completed=10,
        num_errors=0,
        errors_by_kind={},
        ttft_ms=latency,
        itl_ms=latency,
        tpot_ms=latency,
        e2e_ms=latency,
        request_throughput=2.0,
        output_token_throughput=20.0,
        input_token_throughput=40.0,
        total_input_tokens=200,
        total_output_tokens=100,
        goodput=2.0,
    )
    return replace(base, **changes)
