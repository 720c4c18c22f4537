"""The demo's last verdict says a gain only where the engine run did not contradict it."""

from __future__ import annotations

from slotune.tuner.demo import Capacity
from slotune.ui.cli.demo import gain_verdict


def _capacity(label: str, number: int, rate: float, confirmed: bool | None) -> Capacity:
    return Capacity(label, number, {}, rate, confirmed, [])


def test_a_gain_the_engine_run_contradicts_is_not_claimed() -> None:
    default = _capacity("default", 0, 17.0, True)
    line = gain_verdict(default, _capacity("best", 3, 22.75, False))
    assert "not confirmed" in line and "broke an SLO" in line and "1.34x" not in line


def test_a_confirmed_or_unrun_gain_is_given_as_a_ratio() -> None:
    default = _capacity("default", 0, 17.0, True)
    for confirmed in (True, None):
        line = gain_verdict(default, _capacity("best", 3, 22.75, confirmed))
        assert "gain over default: 1.34x" in line


def test_no_gain_lines() -> None:
    default = _capacity("default", 0, 17.0, True)
    assert "the default is the best" in gain_verdict(default, _capacity("best", 0, 17.0, True))
    assert "no gain: the default holds" in gain_verdict(default, _capacity("best", 2, 12.0, True))
    assert gain_verdict(default, None) == ""
    assert gain_verdict(default, _capacity("best", 2, 0.0, None)) == ""
