"""Exported rules use only bucket bounds the engine's release has, and say what moved."""

from __future__ import annotations

import re

import pytest

from slotune.collector.agent.canonical import format_le
from slotune.collector.alerts.promrules import export_prometheus
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.engine_buckets import ENGINE_BUCKETS_S, engine_bounds
from slotune.collector.errors import ConfigError
from slotune.collector.slo import Selector, parse_slo
from slotune.collector.store import Store

_LE = re.compile(r'le="([^"]+)"')


def _les(text: str) -> set[str]:
    return set(_LE.findall(text))


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_a_threshold_between_bounds_snaps_to_a_real_bucket_and_says_so(
    store: Store, engine: str
) -> None:
    # no agent data at all: the bounds come from the engine release's own definitions
    apply_slos(store, [parse_slo("tpot:p90<=40ms", name="chat-tpot")])
    out = export_prometheus(store, engine=engine)
    assert 'le="0.04"' not in out.text
    assert _les(out.text) == {"0.025", "+Inf"}
    (note,) = out.notes
    assert "40ms is not a bucket bound" in note and "up to 25ms" in note and "50ms" in note
    assert out.text.startswith(f"# warning: {note}\n")


def test_a_threshold_on_a_bound_is_kept_without_a_warning(store: Store) -> None:
    apply_slos(store, [parse_slo("ttft:p99<=500ms"), parse_slo("e2e:p99<=20s")])
    out = export_prometheus(store, engine="vllm")
    assert out.notes == ()
    assert _les(out.text) == {"0.5", "20.0", "+Inf"}


def test_every_le_the_export_writes_exists_in_the_engine(store: Store) -> None:
    specs = ["ttft:p99<=300ms", "itl:p95<=30ms", "tpot:p90<=40ms", "e2e:p99<=7s"]
    apply_slos(store, [parse_slo(s) for s in specs])
    text = export_prometheus(store, engine="vllm").text
    known = {format_le(b) for bounds in ENGINE_BUCKETS_S["vllm"].values() for b in bounds}
    assert _les(text) <= known | {"+Inf"}


def test_a_threshold_below_the_first_bound_warns_that_nothing_can_be_good(store: Store) -> None:
    apply_slos(store, [parse_slo("itl:p99<=5ms")])
    (note,) = export_prometheus(store, engine="vllm").notes
    assert "below its first bound 10ms" in note


def test_labels_the_engine_lacks_are_named_with_their_relabelling(store: Store) -> None:
    apply_slos(
        store, [parse_slo("ttft:p99<=500ms", selector=Selector(pool="chat", target="gpu-1"))]
    )
    out = export_prometheus(store, engine="vllm")
    pool, target = out.notes
    assert "exports no 'pool' label" in pool and "target_label: pool, replacement: chat" in pool
    assert "target_label: instance, replacement: gpu-1" in target
    assert 'pool="chat"' in out.text and 'instance="gpu-1"' in out.text


def test_an_engine_whose_bounds_are_a_server_option_needs_scraped_bounds(store: Store) -> None:
    assert engine_bounds("sglang", "ttft") is None
    apply_slos(store, [parse_slo("ttft:p99<=500ms")])
    with pytest.raises(ConfigError, match="run `slotune agent` against the engine first"):
        export_prometheus(store, engine="sglang")


def test_slo_apply_warns_on_vllm_bounds_before_any_engine_data(store: Store) -> None:
    (note,) = apply_slos(
        store, [parse_slo("tpot:p90<=40ms", name="chat-tpot"), parse_slo("ttft:p99<=500ms")]
    )
    assert "SLO 'chat-tpot': 40ms is not a bucket bound" in note and "25ms and 50ms" in note
