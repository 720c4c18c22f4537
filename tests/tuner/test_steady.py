"""Steady state: a run at a rate the engine cannot sustain is detected and run longer."""

from __future__ import annotations

from slotune.collector.records import RequestRecord
from slotune.collector.slo import parse_slos
from slotune.collector.workload import named_workload, retime
from slotune.tuner.sim.config import Engine
from slotune.tuner.tune.backends.sim import SimBackend
from slotune.tuner.tune.objectives import ObjectiveKind
from slotune.tuner.tune.steady import MAX_QUEUE_GROWTH, queue_growth
from slotune.tuner.tune.trial import TrialRunner, WorkloadPlan


def record(i: int, send_s: float, end_s: float | None) -> RequestRecord:
    return RequestRecord(request_id=str(i), send_s=send_s, first_token_s=None, end_s=end_s)


def test_queue_growth_of_a_kept_up_and_an_overloaded_engine() -> None:
    # One request a second; served in 0.5 s, or one every 2 s (half the offered rate).
    kept_up = [record(i, float(i), i + 0.5) for i in range(100)]
    overloaded = [record(i, float(i), 2.0 * (i + 1)) for i in range(100)]
    assert queue_growth(kept_up) == 0.0
    assert queue_growth(overloaded) > MAX_QUEUE_GROWTH
    assert queue_growth([record(0, 0.0, None)]) == 0.0


def test_an_unsteady_run_is_run_again_longer_and_flagged() -> None:
    full = named_workload("azure-conv")
    short = retime(full, num_requests=30)
    slos = tuple(parse_slos(["ttft:p99<=1000s"]))
    backend = SimBackend(Engine.VLLM, "llama-3.1-8b", "h100-sxm")
    # 200 req/s is far beyond an 8B engine on one H100: 30 requests hide it, more do not.
    config = {"max_num_seqs": 8}
    long_plan = WorkloadPlan(short, rate=200.0, source=retime(full, num_requests=120))
    m = TrialRunner(backend, long_plan, slos, ObjectiveKind.GOODPUT).measure(config)
    assert m.summary is not None and m.summary.num_requests == 120
    assert m.unsteady_rates == (200.0,)
    kept = TrialRunner(
        backend, WorkloadPlan(short, rate=0.5, source=full), slos, ObjectiveKind.GOODPUT
    ).measure(config)
    assert kept.summary is not None and kept.summary.num_requests == 30
    assert kept.unsteady_rates == ()
