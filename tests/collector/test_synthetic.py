"""Synthetic length specs and traces."""

from __future__ import annotations

import numpy as np
import pytest

from slotune.collector.errors import ConfigError
from slotune.collector.workload import named_workload
from slotune.collector.workload.synthetic import (
    Column,
    LengthKind,
    LengthSpec,
    parse_length_spec,
    synthetic_trace,
)


@pytest.mark.parametrize(
    ("text", "kind", "params"),
    [
        ("512", LengthKind.FIXED, (512.0,)),
        ("fixed:64", LengthKind.FIXED, (64.0,)),
        ("uniform:128,1024", LengthKind.UNIFORM, (128.0, 1024.0)),
        ("normal:512,64", LengthKind.NORMAL, (512.0, 64.0)),
        ("lognormal:6.2,0.8", LengthKind.LOGNORMAL, (6.2, 0.8)),
        (" Uniform:1,2 ", LengthKind.UNIFORM, (1.0, 2.0)),
    ],
)
def test_spec_grammar(text: str, kind: LengthKind, params: tuple[float, ...]) -> None:
    spec = parse_length_spec(text)
    assert (spec.kind, spec.params) == (kind, params)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("zipf:1,2", "unknown distribution"),
        ("uniform:5", "takes 2"),
        ("uniform:10,5", "low <= high"),
        ("0", "from 1 to 1048576"),
        ("1e30", "from 1 to 1048576"),
        ("normal:nan,1", "finite numbers"),
        ("lognormal:1000,10", "median e"),
        ("12.5", "whole number"),
        ("normal:a,b", "expected numbers"),
        ("lognormal:6,-1", "sigma"),
        ("empirical:", "name a trace"),
        ("empirical:no-such-trace", "neither a bundled trace"),
    ],
)
def test_bad_specs_name_the_flag_and_the_forms(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as e:
        parse_length_spec(text, field_name="--output-len")
    assert "--output-len" in str(e.value)


def test_draws_match_their_distribution() -> None:
    rng = np.random.default_rng(0)
    u = parse_length_spec("uniform:100,200").sample(20000, rng)
    assert u.min() == 100 and u.max() == 200 and abs(u.mean() - 150) < 1.5
    n = parse_length_spec("normal:512,64").sample(20000, rng)
    assert abs(n.mean() - 512) < 2 and abs(n.std() - 64) < 2
    ln = parse_length_spec("lognormal:6.2,0.8").sample(20000, rng)
    assert abs(np.median(ln) - np.exp(6.2)) / np.exp(6.2) < 0.03
    assert parse_length_spec("7").sample(3, rng).tolist() == [7, 7, 7]
    assert parse_length_spec("normal:2,50").sample(1000, rng).min() >= 1


def test_empirical_resamples_the_right_column_of_a_bundled_trace() -> None:
    trace = named_workload("azure-conv")
    inputs = {r.input_tokens for r in trace.requests}
    outputs = {r.output_tokens for r in trace.requests}
    rng = np.random.default_rng(1)
    spec_in = parse_length_spec("empirical:azure-conv", column=Column.INPUT)
    spec_out = parse_length_spec("empirical:azure-conv", column=Column.OUTPUT)
    assert set(spec_in.sample(500, rng).tolist()) <= inputs
    assert set(spec_out.sample(500, rng).tolist()) <= outputs
    assert spec_in.sample(2000, rng).mean() > spec_out.sample(2000, rng).mean()


def test_synthetic_trace_is_deterministic_and_interleaves_sessions() -> None:
    spec = LengthSpec(LengthKind.UNIFORM, (10.0, 20.0), text="uniform:10,20")
    a = synthetic_trace(spec, spec, 7, seed=3, turns=3)
    assert a == synthetic_trace(spec, spec, 7, seed=3, turns=3)
    assert [r.session_id for r in a.requests] == [f"session-{i % 3}" for i in range(7)]
    first, second = a.requests[0], a.requests[3]
    assert second.input_tokens > first.input_tokens + first.output_tokens
    assert all(r.timestamp_s == 0.0 for r in a.requests)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_requests": 0}, "--num-requests"),
        ({"num_requests": 2, "turns": 0}, "--turns"),
        ({"num_requests": 2, "shared_prefix_tokens": -1}, "--shared-prefix"),
    ],
)
def test_synthetic_trace_rejects_bad_sizes(kwargs: dict[str, int], match: str) -> None:
    spec = parse_length_spec("8")
    with pytest.raises(ConfigError, match=match):
        synthetic_trace(spec, spec, **kwargs)
