"""A rule expression with a long run of spaces is read in linear time (it used to backtrack
for minutes: found by benchmarks/fuzz_parsers.py)."""

from __future__ import annotations

import pytest

from slotune.collector.alerts.rules import parse_rules_yaml
from slotune.collector.errors import ConfigError


def test_spaces_before_a_word_that_does_not_fit_are_refused_at_once() -> None:
    text = "rules:\n  - name: down\n    expr: up == 0" + " " * 100_000 + "1m\n"
    with pytest.raises(ConfigError, match="field 'expr'"):
        parse_rules_yaml(text)


def test_spaces_around_the_parts_still_read() -> None:
    (rule,) = parse_rules_yaml(
        "rules:\n  - name: kv\n    expr: '  kv_usage  >  90  %  for  5m  '\n"
    )
    assert rule.name == "kv"
