"""Metric maths on hand-built records shaped like what the client records."""

from __future__ import annotations

import pytest

from slotune.collector.records import RequestRecord
from slotune.collector.slo import parse_slos
from slotune.collector.summary import summarize


def _rec(
    rid: str,
    send: float,
    chunks: list[tuple[float, int]],
    *,
    usage: int | None,
    end: float | None = None,
    error: str | None = None,
) -> RequestRecord:
    times = tuple(t for t, _ in chunks)
    tokens = tuple(n for _, n in chunks)
    first = next((t for t, n in chunks if n > 0), None)
    return RequestRecord(
        request_id=rid,
        send_s=send,
        first_token_s=first,
        end_s=None if error else (end if end is not None else times[-1]),
        chunk_times_s=times,
        chunk_tokens=tokens,
        input_tokens=100,
        output_tokens=usage,
        error=error,
    )


# role-only chunk at 0.010 (no token), tokens at 0.020 (1), 0.030 (2 tokens), usage chunk
MULTI = _rec("multi", 0.0, [(0.010, 0), (0.020, 1), (0.030, 2), (0.050, 1), (0.051, 0)], usage=4)
SINGLE = _rec("single", 1.0, [(1.040, 1), (1.041, 0)], usage=1)
FAILED = _rec("failed", 2.0, [(2.030, 1)], usage=None, error="disconnect")


def test_ttft_counts_from_the_first_token_carrying_chunk() -> None:
    assert MULTI.ttft_s == pytest.approx(0.020)
    s = summarize([MULTI, SINGLE, FAILED]).to_dict()
    assert s["ttft_ms"]["count"] == 2
    assert s["ttft_ms"]["mean"] == pytest.approx((20.0 + 40.0) / 2)


def test_itl_divides_each_gap_by_its_chunk_tokens_and_weights_by_them() -> None:
    # gaps after the first token chunk: 10 ms over 2 tokens, 20 ms over 1 token
    assert MULTI.itl_gaps_s() == [pytest.approx((0.005, 2)), pytest.approx((0.020, 1))]
    s = summarize([MULTI]).to_dict()
    assert s["itl_ms"]["count"] == 3  # pooled per token
    assert s["itl_ms"]["mean"] == pytest.approx((5 + 5 + 20) / 3)
    assert s["itl_ms"]["p50"] == pytest.approx(5.0)


def test_tpot_uses_server_usage_and_skips_single_token_outputs() -> None:
    # (end - first token) / (usage - 1) = (0.051 - 0.020) / 3
    assert MULTI.tpot_s == pytest.approx(0.031 / 3)
    assert SINGLE.tpot_s is None
    s = summarize([MULTI, SINGLE]).to_dict()
    assert s["tpot_ms"]["count"] == 1
    assert s["itl_ms"]["count"] == 3  # the single-token request adds no gap


def test_e2e_runs_to_the_last_byte() -> None:
    assert MULTI.e2e_s == pytest.approx(0.051)
    assert summarize([SINGLE]).to_dict()["e2e_ms"]["p50"] == pytest.approx(41.0)


def test_failed_requests_count_as_errors_and_never_as_good() -> None:
    slos = parse_slos(["ttft:p50<=100ms", "error_rate<=50%"])
    s = summarize([MULTI, SINGLE, FAILED], slos).to_dict()
    assert s["num_errors"] == 1 and s["errors_by_kind"] == {"disconnect": 1}
    assert s["total_output_tokens"] == 5  # usage of the two completed requests
    ttft = s["slo_attainment"][0]
    assert ttft["attainment"] == pytest.approx(2 / 3)
    err = s["slo_attainment"][1]
    assert err["value"] == pytest.approx(1 / 3) and err["met"] is True


def test_goodput_counts_requests_meeting_every_slo() -> None:
    slos = parse_slos(["ttft:p99<=30ms", "e2e:p99<=1s"])
    s = summarize([MULTI, SINGLE, FAILED], slos, duration_s=2.0).to_dict()
    assert s["goodput"] == pytest.approx(1 / 2.0)  # only MULTI: TTFT 20 ms
    assert s["request_throughput"] == pytest.approx(2 / 2.0)
