"""When a study may call a difference a gain: what bounded each trial, and repeat spreads."""

import pytest

from slotune.tuner.gain import Limit, are_apart, judge_gain, trial_limit
from slotune.tuner.objectives import SATURATION_RATE, ObjectiveKind


def offered(rate=2.0, goodput=2.0, served=2.0, growth=0.0, slos_met=True, unsteady=()):
    return {
        "rate": rate,
        "summary": {
            "goodput": goodput,
            "request_throughput": served,
            "queue_growth": growth,
            "slos_met": slos_met,
        },
        "curve": [[rate, goodput, slos_met]],
        "failure": None,
        "unsteady_rates": list(unsteady),
    }


def test_a_run_below_capacity_within_every_slo_cannot_tell_configurations_apart():
    assert trial_limit(ObjectiveKind.GOODPUT, offered()) is Limit.OFFERED_LOAD
    assert trial_limit(ObjectiveKind.THROUGHPUT, offered()) is Limit.OFFERED_LOAD


def test_a_broken_slo_a_growing_queue_or_saturation_bound_the_figure():
    assert trial_limit(ObjectiveKind.GOODPUT, offered(slos_met=False)) is Limit.SLO
    assert trial_limit(ObjectiveKind.GOODPUT, offered(goodput=1.5)) is Limit.SLO
    assert trial_limit(ObjectiveKind.GOODPUT, offered(growth=0.4)) is Limit.SATURATION
    assert trial_limit(ObjectiveKind.GOODPUT, offered(unsteady=[2.0])) is Limit.SATURATION
    assert trial_limit(ObjectiveKind.THROUGHPUT, offered(rate=SATURATION_RATE)) is Limit.SATURATION
    assert trial_limit(ObjectiveKind.GOODPUT, {"failure": "no memory"}) is Limit.NOT_RUN


def test_capacity_is_bounded_only_when_a_rate_tried_broke_an_slo():
    held = {
        "rate": 8.0,
        "summary": {"slos_met": True},
        "curve": [[4.0, 4.0, True], [8.0, 8.0, True]],
    }
    assert trial_limit(ObjectiveKind.CAPACITY, held) is Limit.OFFERED_LOAD
    broke = {**held, "curve": [[4.0, 4.0, True], [8.0, 8.0, True], [9.0, 6.0, False]]}
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
