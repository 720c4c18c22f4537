import itertools
import json
import math
import re
from pathlib import Path

import pytest

from slotune.collector.errors import ConfigError
from slotune.collector.workload import (
    NAMED_WORKLOADS,
    load_trace,
    named_workload,
    resolve_workload,
    retime,
)
from slotune.collector.workload.tokens import count_tokens, synthetic_text


@pytest.mark.parametrize("name", sorted(NAMED_WORKLOADS))
def test_bundled_traces_load(name: str) -> None:
    t = named_workload(name)
    assert len(t) > 1000
    assert t.requests[0].timestamp_s == 0.0
    assert all(b.timestamp_s >= a.timestamp_s for a, b in itertools.pairwise(t.requests))
    assert t.source


def test_azure_conv_matches_published_size() -> None:
    t = named_workload("azure-conv")
    assert len(t) == 19366
    assert 5.0 < t.mean_rate < 6.0


def test_mooncake_hash_ids_are_512_token_blocks() -> None:
    r = named_workload("mooncake-conversation").requests[0]
    assert r.block_size == 512
    assert len(r.hash_ids) == -(-r.input_tokens // 512)


def test_canonical_absolute_timestamps_become_relative(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    lines = [
        {"timestamp": 1_700_000_010.5, "input_tokens": 5, "output_tokens": 2},
        {"timestamp": 1_700_000_010.0, "input_tokens": 7, "output_tokens": 3, "session_id": 4},
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    t = load_trace(p)
    assert [r.timestamp_s for r in t.requests] == [0.0, 0.5]
    assert t.requests[0].session_id == "4"


def test_bad_line_names_file_line_and_fields(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 0, "input_tokens": 5, "output_tokens": 2}\n{"timestamp": 1}\n')
    with pytest.raises(ConfigError, match=r"t.jsonl:2: missing field 'input_tokens'"):
        load_trace(p)


def test_unknown_workload_lists_choices() -> None:
    with pytest.raises(ConfigError, match="azure-conv"):
        named_workload("nope")
    with pytest.raises(ConfigError, match="exactly one"):
        resolve_workload(None, None)


def test_retime_poisson_is_seeded_and_rate_close() -> None:
    t = named_workload("azure-code")
    a = retime(t, rate=10.0, num_requests=2000, seed=1)
    b = retime(t, rate=10.0, num_requests=2000, seed=1)
    assert a.requests == b.requests
    assert len(a) == 2000
    assert 9.0 < a.mean_rate < 11.0


def test_synthetic_text_has_exact_token_count() -> None:
    for n in (1, 7, 512):
        assert count_tokens(synthetic_text(n, seed=n)) == n
    assert synthetic_text(20, 3) == synthetic_text(20, 3)
    assert count_tokens("Hello, world!") == 4


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ('{"timestamp": NaN, "input_tokens": 5, "output_tokens": 5}', "'timestamp': NaN"),
        ('{"timestamp": Infinity, "input_tokens": 5, "output_tokens": 5}', "'timestamp': Inf"),
        ('{"timestamp": 1e308, "input_tokens": 5, "output_tokens": 5}', "out of range"),
        ('{"timestamp": -1, "input_tokens": 5, "output_tokens": 5}', "out of range"),
        ('{"timestamp": 0, "input_tokens": 1e12, "output_tokens": 5}', "1 to 1048576"),
        ('{"timestamp": 0, "input_tokens": 5.5, "output_tokens": 5}', "must be an integer"),
        ('{"timestamp": 0, "input_tokens": true, "output_tokens": 5}', "must be an integer"),
        ('{"timestamp": 0, "input_tokens": 5, "output_tokens": ' + "9" * 400 + "}", "20 digits"),
        ('{"timestamp": 0, "input_tokens": 5, "output_tokens": 5, "hash_ids": 3}', "hash_ids"),
        ("[" * 100_000, "nests deeper"),
    ],
)
def test_absurd_values_are_refused_with_the_line_number(
    tmp_path: Path, line: str, match: str
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_tokens": 5, "output_tokens": 5}\n' + line + "\n")
    with pytest.raises(ConfigError, match=match) as e:
        load_trace(path, "canonical")
    assert f"{path}:2:" in str(e.value)


def test_azure_counts_below_one_are_refused_like_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.1,10,5\n"
        "2023-11-16 18:17:04.1,-3,5\n"
    )
    with pytest.raises(ConfigError, match=r"t.csv:3: 'ContextTokens' must be an integer of at"):
        load_trace(path)


def test_a_binary_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"timestamp": 0}\n\xff\xfe\x00garbage')
    with pytest.raises(ConfigError, match="not a UTF-8 text trace file"):
        load_trace(path)


@pytest.mark.parametrize(
    "kwargs", [{"rate": math.nan}, {"time_scale": math.nan}, {"time_scale": math.inf}]
)
def test_retime_refuses_non_finite_numbers(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match="must be"):
        retime(named_workload("azure-code"), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "ContextTokens,GeneratedTokens,TIMESTAMP\n1,2,2023-11-16 18:17:03.1\n3,4\n",
            "trace.csv:3: the row ends before its TIMESTAMP column",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04.1,5\n",
            "trace.csv:2: the row ends before its GeneratedTokens column",
        ),
        ("TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.1,5\n", "no GeneratedTokens column"),
        (
            'TIMESTAMP,ContextTokens,GeneratedTokens\n"' + "a" * 200_000 + ",1,1\n",
            "not a CSV row (field larger than field limit",
        ),
    ],
)
def test_a_short_or_oversized_azure_row_is_one_line(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_trace(path)


def test_a_jsonl_line_past_the_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import slotune.collector.workload.traces as traces

    monkeypatch.setattr(traces, "MAX_LINE_CHARS", 100)
    path = tmp_path / "trace.jsonl"
    line = {"timestamp": 0, "input_tokens": 1, "output_tokens": 1}
    path.write_text(json.dumps(line) + "\n" + json.dumps({**line, "x": "y" * 200}) + "\n")
    with pytest.raises(ConfigError, match=r"trace\.jsonl:2: a line longer than 100 characters"):
        load_trace(path)
