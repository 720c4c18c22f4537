"""When a study may call a difference a gain: what bounded each trial, and repeat spreads."""

from dataclasses import replace

import pytest
from _summaries import run_summary

from slotune.collector.slo import Attainment, parse_slo
from slotune.tuner.tune.gain import Limit, are_apart, judge_gain, trial_limit
from slotune.tuner.tune.objectives import SATURATION_RATE, CurvePoint, Measurement, ObjectiveKind


def run(goodput=2.0, served=2.0, growth=0.0, slos_met=True):
    met = Attainment(parse_slo("ttft:p99<=500ms"), 10 if slos_met else 5, 10, 0.1)
    return run_summary(
        request_throughput=served, goodput=goodput, slo_attainment=(met,), queue_growth=growth
    )


def offered(rate=2.0, goodput=2.0, served=2.0, growth=0.0, slos_met=True, unsteady=()):
    return Measurement(
        values=(goodput,),
        constraints={},
        rate=rate,
        summary=run(goodput, served, growth, slos_met),
        curve=(CurvePoint(rate, goodput, slos_met),),
        unsteady_rates=tuple(unsteady),
    )


def test_a_run_below_capacity_within_every_slo_cannot_tell_configurations_apart():
    assert trial_limit(ObjectiveKind.GOODPUT, offered()) is Limit.OFFERED_LOAD
    assert trial_limit(ObjectiveKind.THROUGHPUT, offered()) is Limit.OFFERED_LOAD


def test_a_broken_slo_a_growing_queue_or_saturation_bound_the_figure():
    assert trial_limit(ObjectiveKind.GOODPUT, offered(slos_met=False)) is Limit.SLO
    assert trial_limit(ObjectiveKind.GOODPUT, offered(goodput=1.5)) is Limit.SLO
    assert trial_limit(ObjectiveKind.GOODPUT, offered(growth=0.4)) is Limit.SATURATION
    assert trial_limit(ObjectiveKind.GOODPUT, offered(unsteady=[2.0])) is Limit.SATURATION
    assert trial_limit(ObjectiveKind.THROUGHPUT, offered(rate=SATURATION_RATE)) is Limit.SATURATION
    no_memory = Measurement(values=(0.0,), constraints={}, failure="no memory")
    assert trial_limit(ObjectiveKind.GOODPUT, no_memory) is Limit.NOT_RUN


def test_capacity_is_bounded_only_when_a_rate_tried_broke_an_slo():
    held = Measurement(
        values=(8.0,),
        constraints={},
        rate=8.0,
        summary=run(),
        curve=(CurvePoint(4.0, 4.0, True), CurvePoint(8.0, 8.0, True)),
    )
    assert trial_limit(ObjectiveKind.CAPACITY, held) is Limit.OFFERED_LOAD
    broke = replace(held, curve=(*held.curve, CurvePoint(9.0, 6.0, False)))
    assert trial_limit(ObjectiveKind.CAPACITY, broke) is Limit.SLO


def test_no_gain_over_a_default_limited_by_the_offered_load():
    v = judge_gain(2.3, 2.0, Limit.OFFERED_LOAD, [], [])
    assert v.gain is None and "could not tell the configurations apart" in (v.note or "")
    assert v.difference == pytest.approx(0.3)


def test_a_difference_inside_the_repeat_spread_is_noise():
    v = judge_gain(11.0, 10.0, Limit.SLO, [11.0, 12.5], [10.0, 11.5])
    assert v.gain is None and "within noise" in (v.note or "")
    assert v.spread == pytest.approx(1.5)


def test_a_gain_is_claimed_when_every_run_of_the_best_beats_every_run_of_the_default():
    v = judge_gain(18.5, 14.9, Limit.SLO, [18.5, 22.6], [14.9, 13.7])
    assert v.gain == pytest.approx(18.5 / 14.9) and v.note is None
    assert v.spread == pytest.approx(4.1)
    unrepeated = judge_gain(18.5, 14.9, Limit.SATURATION, [], [])
    assert unrepeated.gain == pytest.approx(18.5 / 14.9)
    assert "spread unknown" in (unrepeated.note or "")


def test_runs_apart():
    assert are_apart([3.0, 4.0], [1.0, 2.9])
    assert not are_apart([3.0, 4.0], [1.0, 3.0])
    assert not are_apart([], [1.0])
