"""Splitting a grouped query per selector: the matchers of many selectors keep every series
one of them keeps, and ``keeps`` picks each selector's own, as its matchers would."""

from __future__ import annotations

import re

from slotune.collector.metrics import promql
from slotune.collector.slo import Selector

SERIES = [
    {"job": "vllm", "instance": "10.0.0.1:8000", "pool": "p1", "model_name": "m"},
    {"job": "vllm", "instance": "b:8000", "pool": "p2", "model_name": "m"},
    {"job": "sglang", "instance": "10.0.0.1:8000", "pool": "p1"},
    {"job": "other", "instance": "c:9000"},
]


def _kept_by_matchers(matchers: list[str], labels: dict[str, str]) -> bool:
    """What Prometheus keeps: ``=`` exact, ``=~`` an anchored regex, a missing label ""."""
    for m in matchers:
        name, op, value = re.fullmatch(r'(\w+)(=~|=)"(.*)"', m).groups()  # type: ignore[union-attr]
        value = value.replace("\\\\", "\\")
        got = labels.get(name, "")
        if not (re.fullmatch(value, got) if op == "=~" else got == value):
            return False
    return True


def test_keeps_is_what_the_selectors_matchers_keep() -> None:
    selectors = [
        Selector(),
        Selector(target="vllm/10.0.0.1:8000"),
        Selector(target="10.0.0.1:8000"),
        Selector(pool="p1"),
        Selector(model="m"),
        Selector(target="c:9000", pool=""),
        Selector(pool="p1", model="m"),
    ]
    for sel in selectors:
        for labels in SERIES:
            want = _kept_by_matchers(promql.selector_matchers(sel), labels)
            assert promql.keeps(sel, labels) is want, (sel, labels)


def test_the_matchers_of_many_selectors_keep_every_series_one_keeps() -> None:
    groups = [
        [Selector(target="vllm/10.0.0.1:8000"), Selector(target="c:9000")],
        [Selector(target="vllm/10.0.0.1:8000"), Selector(target="sglang/10.0.0.1:8000")],
        [Selector(pool="p1"), Selector(pool="p2", model="m")],
        [Selector(model="m"), Selector(target="vllm/b:8000")],
        [Selector(), Selector(pool="p1")],
    ]
    for selectors in groups:
        matchers = promql.any_of(selectors)
        for labels in SERIES:
            if any(promql.keeps(s, labels) for s in selectors):
                assert _kept_by_matchers(matchers, labels), (selectors, labels)


def test_a_selector_groups_by_the_labels_it_reads() -> None:
    assert promql.group_labels(Selector()) == ()
    assert promql.group_labels(Selector(target="10.0.0.1:8000", model="m")) == (
        "job",
        "instance",
        "model_name",
    )
    assert promql.group_labels(Selector(pool="p")) == ("pool",)
