import math

import pytest

from slotune.collector.records import RequestRecord
from slotune.collector.slo import parse_slos
from slotune.collector.summary import summarize


def rec(
    rid: str,
    send: float,
    chunks: list[tuple[float, int]],
    *,
    out: int | None = None,
    error: str | None = None,
    inp: int = 10,
) -> RequestRecord:
    times = tuple(t for t, _ in chunks)
    toks = tuple(n for _, n in chunks)
    first = next((t for t, n in chunks if n > 0), None)
    return RequestRecord(
        rid,
        send,
        None if error else first,
        None if error else times[-1],
        times,
        toks,
        inp,
        out,
        error=error,
    )


def test_ttft_is_first_token_carrying_chunk_not_role_chunk() -> None:
    r = rec("a", 0.0, [(0.05, 0), (0.2, 1), (0.3, 1)], out=2)
    s = summarize([r])
    assert s.ttft_ms.mean == pytest.approx(200.0)


def test_itl_pooled_per_token_and_weighted_by_chunk_tokens() -> None:
    # gaps: 0.4 s over 2 tokens -> 0.2 s twice; 0.5 s over 1 token.
    r = rec("a", 0.0, [(0.1, 1), (0.5, 2), (1.0, 1)], out=4)
    s = summarize([r])
    assert s.itl_ms.count == 3
    assert s.itl_ms.mean == pytest.approx(300.0)
    assert s.itl_ms.percentiles[50.0] == pytest.approx(200.0)


def test_tpot_uses_server_usage_tokens() -> None:
    r = rec("a", 0.0, [(0.1, 1), (1.1, 5)], out=11)
    s = summarize([r])
    assert s.tpot_ms.mean == pytest.approx(100.0)  # (1.1 - 0.1) / (11 - 1)
    assert s.total_output_tokens == 11


def test_single_token_output_has_no_tpot_or_itl() -> None:
    s = summarize([rec("a", 0.0, [(0.1, 1)], out=1)])
    assert s.tpot_ms.count == 0 and s.itl_ms.count == 0
    assert s.tpot_ms.mean is None
    assert s.e2e_ms.mean == pytest.approx(100.0)


def test_zero_token_chunks_do_not_count_as_gaps() -> None:
    r = rec("a", 0.0, [(0.1, 1), (0.15, 0), (0.3, 1)], out=2)
    s = summarize([r])
    assert s.itl_ms.count == 1
    assert s.itl_ms.mean == pytest.approx(200.0)


def test_failed_requests_count_as_errors_and_break_goodput() -> None:
    ok = rec("a", 0.0, [(0.1, 1), (0.2, 1)], out=2)
    bad = rec("b", 0.0, [(0.1, 1)], error="timeout")
    slow = rec("c", 0.0, [(0.9, 1), (1.0, 1)], out=2)
    s = summarize(
        [ok, bad, slow], parse_slos(["ttft:p50<=500ms", "error_rate<=10%"]), duration_s=2.0
    )
    assert s.num_errors == 1 and s.errors_by_kind == {"timeout": 1}
    assert s.goodput == pytest.approx(0.5)  # only "a" is good, over 2 s
    ttft, err = s.slo_attainment
    assert ttft.attainment == pytest.approx(1 / 3)
    assert not err.is_met and err.value == pytest.approx(1 / 3)
    assert not s.all_slos_met


def test_summary_json_schema_names() -> None:
    d = summarize([rec("a", 0.0, [(0.1, 1), (0.2, 1)], out=2)]).to_dict()
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        assert set(d[key]) >= {"mean", "p50", "p90", "p95", "p99", "p99.9", "std"}
    for key in ("request_throughput", "output_token_throughput", "goodput", "slo_attainment"):
        assert key in d


def test_empty_run() -> None:
    s = summarize([])
    assert s.num_requests == 0 and s.request_throughput == 0.0
    assert s.ttft_ms.mean is None
    assert not math.isnan(s.goodput)
