"""The fitted step terms in the cost model, and the score calibration is judged by."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slotune.tuner.sim.calibration.objective import errors
from slotune.tuner.sim.catalog import Efficiency, StepTerms, get_gpu, get_model
from slotune.tuner.sim.cost import CostModel, StepShape

TERMS = StepTerms(
    step_s=1e-3,
    prefill_token_s=2e-6,
    attention_pair_s=1e-10,
    decode_seq_s=5e-5,
    kv_token_s=1e-8,
)


def _models(terms: StepTerms) -> tuple[CostModel, CostModel]:
    gpu = get_gpu("h100-sxm")
    calibrated = dataclasses.replace(gpu, efficiency=Efficiency(step_terms=terms))
    model = get_model("llama-3.1-8b")
    return CostModel(model, gpu), CostModel(model, calibrated)


def test_terms_add_to_every_step_and_to_its_overhead() -> None:
    base, calibrated = _models(TERMS)
    shape = StepShape(512, 512 * 256.0, 8, 8000, 1)
    added = 1e-3 + 2e-6 * 512 + 1e-10 * 512 * 256 + 5e-5 * 8 + 1e-8 * 8000
    assert calibrated.step_time_s(512, 512 * 256.0, 8, 8000, 1) == pytest.approx(
        base.step_time_s(512, 512 * 256.0, 8, 8000, 1) + added
    )
    before, after = base.step_time(shape), calibrated.step_time(shape)
    assert after.total_s == pytest.approx(before.total_s + added)
    assert after.overhead_s == pytest.approx(before.overhead_s + added)
    assert after.compute_s == before.compute_s


def test_negative_terms_never_take_a_step_below_a_tenth_of_the_roofline() -> None:
    base, calibrated = _models(StepTerms(step_s=-1.0))
    assert calibrated.step_time_s(0, 0.0, 1, 100) == pytest.approx(
        0.1 * base.step_time_s(0, 0.0, 1, 100)
    )


def test_score_is_the_worst_error_over_its_tolerance() -> None:
    measured = {k: np.array([1.0, 1.0, 1.0, 1.0]) for k in ("ttft", "tpot", "e2e")}
    simulated = {
        "ttft": np.array([1.2, 1.2, 1.2, 1.2]),
        "tpot": np.array([1.05, 1.05, 1.05, 1.05]),
        "e2e": np.array([1.0, 1.0, 1.0, np.nan]),
    }
    e = errors(simulated, measured)
    assert e.ttft == pytest.approx(0.2) and e.tpot == pytest.approx(0.05)
    assert e.ttft_p90 == pytest.approx(0.2)
    # TTFT mean at its tolerance (1.0); TTFT p90 +20 % against 25 % (0.82); E2E: a request
    # the simulation failed counts as slower than any real one.
    assert e.e2e > 1000 and e.score > 50
    simulated["e2e"] = np.ones(4)
    assert errors(simulated, measured).score == pytest.approx(1.0)
