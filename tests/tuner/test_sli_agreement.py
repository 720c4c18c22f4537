"""One SLO, one number: tuning, goodput and the alert evaluator agree on every SLI.

The same requests are read three ways: as a tuning trial reads its run (the summary's SLO
attainment behind the Optuna constraint), as goodput counts them, and as the alert evaluator
counts them, from the benchmark records and from engine histograms that observe the same
events the engine would (a request for ttft / tpot / e2e, every token gap for itl, each
request's finished reason for error_rate).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from slotune.collector.alerts.sli import Counts, SliReader, bench_counts
from slotune.collector.records import RequestRecord
from slotune.collector.slo import SLI, SLO, parse_slo, pooled_itl_gaps
from slotune.collector.store import SampleIn, Store, open_store, register_target, write_samples
from slotune.collector.store import upgrade as upgrade_store
from slotune.collector.summary import summarize
from slotune.tuner.tune.objectives import LAUNCH_CONSTRAINT, slo_constraints

T0 = 1_700_000_000.0
# vLLM-like bucket bounds; each SLO threshold below is one of them, as the export snaps it.
BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@pytest.fixture
def store(sqlite_url: str) -> Iterator[Store]:
    upgrade_store(sqlite_url)
    with open_store(sqlite_url) as s:
        yield s


def _requests() -> list[RequestRecord]:
    """40 streamed requests with spread TTFT and decode gaps, every fifth one with a long
    stall, and three failures (one before its first token)."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(40):
        send = float(i)
        first = send + float(rng.uniform(0.05, 0.6))
        gaps = rng.uniform(0.005, 0.04, size=int(rng.integers(2, 30)))
        if i % 5 == 0:
            gaps[len(gaps) // 2] = float(rng.uniform(0.2, 0.8))
        tokens = tuple(int(n) for n in rng.integers(1, 3, size=len(gaps) + 1))
        times = tuple(float(t) for t in first + np.concatenate(([0.0], np.cumsum(gaps))))
        out.append(
            RequestRecord(f"r{i}", send, first, times[-1], times, tokens, 100, sum(tokens), None)
        )
    out[3] = RequestRecord("r3", 3.0, 3.2, None, (3.2, 3.3), (1, 1), 100, None, "timeout")
    out[17] = RequestRecord("r17", 17.0, None, None, error="http_5xx", http_status=500)
    out[29] = RequestRecord("r29", 29.0, 29.1, None, (29.1,), (1,), 100, None, "disconnect")
    return out


def _engine_events(sli: SLI, records: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """(value, weight) of each observation the engine's histogram makes for these requests
    (the engine observes latencies of the requests it finished)."""
    done = [r for r in records if r.is_ok]
    if sli is SLI.ITL:
        return pooled_itl_gaps(done)
    value = {SLI.TTFT: "ttft_s", SLI.TPOT: "tpot_s", SLI.E2E: "e2e_s"}[sli]
    values = [v for r in done if (v := getattr(r, value)) is not None]
    return np.asarray(values), np.ones(len(values), dtype=np.int64)


def _write_engine_series(store: Store, sli: SLI, records: Sequence[RequestRecord]) -> None:
    register_target(store, "engine", "vllm", "")
    if sli is SLI.ERROR_RATE:
        failed = sum(1 for r in records if not r.is_ok)
        reasons = {"stop": len(records) - failed, "length": 0, "abort": failed}
        rows = [
            SampleIn(
                "engine", "requests_finished", "counter", {"finished_reason": k}, ts, n * scale
            )
            for ts, scale in ((T0, 0), (T0 + 60, 1))
            for k, n in reasons.items()
        ]
        write_samples(store, rows)
        return
    values, weights = _engine_events(sli, records)
    rows = []
    for ts, scale in ((T0, 0), (T0 + 60, 1)):
        for le in (*BOUNDS, math.inf):
            count = float(weights[values <= le].sum()) * scale
            label = "+Inf" if math.isinf(le) else f"{le:g}"
            rows.append(
                SampleIn("engine", f"{sli.value}_bucket", "histogram", {"le": label}, ts, count)
            )
    write_samples(store, rows)


def _good_requests_in_goodput(slo: SLO, records: Sequence[RequestRecord]) -> int:
    summary = summarize(records, [slo])
    return round(summary.goodput * summary.duration_s)


@pytest.mark.parametrize(
    "spec", ["ttft:p90<=250ms", "itl:p99<=50ms", "tpot:p90<=25ms", "e2e:p95<=1s", "error_rate<=5%"]
)
def test_tuning_goodput_and_alerts_count_the_same_events(store: Store, spec: str) -> None:
    slo = parse_slo(spec)
    records = _requests()
    summary = summarize(records, [slo])
    (att,) = summary.slo_attainment

    # tuning: the trial's constraint is objective - attainment of exactly these counts
    constraint = slo_constraints(summary, [slo])
    assert set(constraint) == {slo.name, LAUNCH_CONSTRAINT}
    if slo.sli is not SLI.ERROR_RATE and att.is_met:
        assert constraint[slo.name] == pytest.approx(slo.objective - att.attainment, abs=1e-9)
    assert (constraint[slo.name] <= 0) == att.is_met

    # the alert evaluator, from the benchmark records and from the engine's own histogram
    assert bench_counts(slo, records) == Counts(float(att.num_good), float(att.num_total))
    _write_engine_series(store, slo.sli, records)
    read = SliReader(store, T0 + 60).counts(slo, [60.0])
    assert read.note is None
    engine = read.counts[0]
    assert engine is not None
    if slo.sli is SLI.ERROR_RATE:
        assert engine == Counts(float(att.num_good), float(att.num_total))
    else:
        # the engine observes only finished requests; slotune counts failed ones as bad
        # requests for a latency SLO, which the error_rate SLO counts on the engine side
        failed = sum(1 for r in records if not r.is_ok) if slo.sli.is_per_request else 0
        assert engine == Counts(float(att.num_good), float(att.num_total - failed))

    # goodput: requests good for every per-request SLO; an itl or error_rate SLO judges
    # the run, so goodput counts every completed request under it
    completed = sum(1 for r in records if r.is_ok)
    expected = att.num_good if slo.sli.is_per_request else completed
    assert _good_requests_in_goodput(slo, records) == expected
    # the SLO's observed value is the run summary's percentile of the same events
    if slo.sli is not SLI.ERROR_RATE:
        shown = getattr(summary, f"{slo.sli.value}_ms").percentiles[slo.percentile]
        assert att.value is not None and att.value * 1000 == pytest.approx(shown)
    # and the SLO is not trivially met or missed on these requests
    assert 0 < att.num_good < att.num_total
