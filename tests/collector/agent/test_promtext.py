"""The Prometheus / OpenMetrics parser on real expositions, doc excerpts and garbage."""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Iterable
from typing import Any

import pytest
from agent_helpers import DATA, data_text
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families as prometheus_families

from slotune.collector.agent.base import Family, MetricType, Sample
from slotune.collector.agent.promtext import PromTextParser, parse_text
from slotune.collector.agent.sampleline import SampleLine, scan_sample_line
from slotune.collector.errors import SourceError

PROM_FILES = sorted(p.name for p in DATA.glob("*.prom"))


def _family(families: tuple[Family, ...], name: str) -> Family:
    return next(f for f in families if f.name == name)


@pytest.mark.parametrize("name", PROM_FILES)
def test_every_exposition_file_parses_and_reports_elisions(name: str) -> None:
    text = data_text(name)
    result = parse_text(text, source=name)
    assert sum(len(f.samples) for f in result.families) > 0
    elisions = [n for n, line in enumerate(text.splitlines(), 1) if line.strip() == "..."]
    assert [s.line_no for s in result.skipped if "elision" in s.reason] == elisions


def test_iteration_tokens_total_is_a_histogram_not_a_counter() -> None:
    result = parse_text(data_text("vllm_usage_doc_iteration_tokens_excerpt.prom"))
    fam = _family(result.families, "vllm:iteration_tokens_total")
    assert fam.type is MetricType.HISTOGRAM
    assert fam.samples[0] == Sample(
        "vllm:iteration_tokens_total_sum", (("model_name", "unsloth/Llama-3.2-1B-Instruct"),), 0.0
    )
    assert len(fam.samples) == 9


def test_design_doc_keeps_good_lines_around_elided_and_truncated_ones() -> None:
    result = parse_text(data_text("vllm_v1_design_doc_example.prom"))
    success = _family(result.families, "vllm:request_success_total")
    assert success.type is MetricType.COUNTER
    assert {s.label("finished_reason"): s.value for s in success.samples} == {
        "stop": 1.0,
        "length": 131.0,
        "abort": 0.0,
    }
    ttft = _family(result.families, "vllm:time_to_first_token_seconds")
    assert ttft.type is MetricType.HISTOGRAM
    reasons = {s.line_no: s.reason for s in result.skipped}
    assert "malformed labels" in reasons[28]  # cache_config_info{...,...} 1.0


def test_untyped_bucket_lines_are_grouped_as_a_histogram() -> None:
    result = parse_text(data_text("vllm_v0_issue8819_ttft_excerpt.prom"))
    (fam,) = result.families
    assert (fam.name, fam.type, len(fam.samples)) == (
        "vllm:time_to_first_token_seconds",
        MetricType.HISTOGRAM,
        15,
    )


def test_openmetrics_body_by_content_type() -> None:
    text = (
        "# TYPE engine_requests counter\n"
        'engine_requests_total{model="m"} 7.0\n'
        'engine_requests_created{model="m"} 1.7e9\n'
        "# EOF\n"
    )
    result = parse_text(text, content_type="application/openmetrics-text; version=1.0.0")
    (fam,) = result.families
    assert (fam.name, fam.type) == ("engine_requests", MetricType.COUNTER)
    assert fam.samples == (Sample("engine_requests_total", (("model", "m"),), 7.0),)


def test_label_escapes_and_timestamps() -> None:
    text = 'm{path="a\\"b\\\\c\\nd"} 1 1700000000000\n... \n'
    result = parse_text(text)
    assert result.families[0].samples[0].labels == (("path", 'a"b\\c\nd'),)


def test_a_body_without_any_sample_is_a_clear_error() -> None:
    with pytest.raises(SourceError, match=r"no metric samples in http://x/metrics: line 1"):
        parse_text("<html>Not Found</html>\n", source="http://x/metrics")


def test_empty_body_is_no_error() -> None:
    assert parse_text("").families == ()


_METRIC_CHARS = st.sampled_from([*list('abc_:{}="\\, .\n#0123456789+-eE'), "...", "le", "Inf"])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(_METRIC_CHARS, max_size=80).map("".join)))
def test_fuzz_never_crashes(text: str) -> None:
    try:
        result = parse_text(text)
    except SourceError as e:
        assert "no metric samples" in str(e)
        return
    for fam in result.families:
        assert all(isinstance(s.value, float) for s in fam.samples)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(data_text("vllm_v1_design_doc_example.prom").splitlines()), max_size=30
    )
)
def test_fuzz_shuffled_real_lines(lines: list[str]) -> None:
    with contextlib.suppress(SourceError):
        parse_text("\n".join(lines))


def _flatten(families: Iterable[Any]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(dict(s.labels).items()))): float(s.value)
        for f in families
        for s in f.samples
        if not s.name.endswith("_created")
    }


VALID_FILES = [n for n in PROM_FILES if "..." not in data_text(n)]


@pytest.mark.parametrize("name", VALID_FILES)
def test_line_parser_agrees_with_prometheus_client(name: str) -> None:
    text = data_text(name)
    reference = list(prometheus_families(text))
    for fam in reference:  # prometheus_client appends _total to counters that lack it
        fam.samples = [
            s._replace(name=s.name.removesuffix("_total")) if s.name not in text else s
            for s in fam.samples
        ]
    parser = PromTextParser()
    for _ in range(2):  # the second parse goes through the series-line cache
        ours = parser.parse(text).families
        assert _flatten(ours) == _flatten(reference)
        typed = {s.name: f.type for f in reference if f.type != "unknown" for s in f.samples}
        our_types = {s.name: f.type.value for f in ours for s in f.samples}
        assert {n: our_types[n] for n in typed} == typed


def test_cached_series_lines_still_read_new_values_and_timestamps() -> None:
    parser = PromTextParser()
    parser.parse('a{x="1"} 1\nb 2\n')
    again = parser.parse('a{x="1"} 5\nb 7 1700000000000\nb 8\n')
    assert _flatten(again.families) == {("a", (("x", "1"),)): 5.0, ("b", ()): 8.0}


def test_unchanged_body_and_families_come_back_as_the_same_objects() -> None:
    parser = PromTextParser()
    body = '# TYPE a counter\na_total{x="1"} 1\n# TYPE g gauge\ng 2\n'
    first = parser.parse(body)
    assert parser.parse(body) is first
    changed = parser.parse(body.replace("g 2", "g 3"))
    assert _family(changed.families, "a") is _family(first.families, "a")
    assert _flatten(changed.families) == {("a_total", (("x", "1"),)): 1.0, ("g", ()): 3.0}


# The sample regex the line parser had before it read lines left to right: the new reader
# must keep every sample it accepted, as it read it.
_OLD_SAMPLE_RE = re.compile(
    r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?\s+(\S+)(?:\s+(-?\d+(?:\.\d+)?))?\s*$"
)
_OLD_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def _old_sample(line: str) -> tuple[str, tuple[tuple[str, str], ...], float] | None:
    m = _OLD_SAMPLE_RE.match(line)
    if not m:
        return None
    pairs: dict[str, str] = {}
    text, pos = (m.group(2) or "").strip(), 0
    while pos < len(text):
        lm = _OLD_LABEL_RE.match(text, pos)
        if not lm:
            return None
        pairs[lm.group(1)] = re.sub(
            r"\\[\\\"n]", lambda e: {"\\\\": "\\", '\\"': '"', "\\n": "\n"}[e.group(0)], lm[2]
        )
        pos = lm.end()
    try:
        return m.group(1), tuple(sorted(pairs.items())), float(m.group(3))
    except ValueError:
        return None


_LINE_PARTS = st.sampled_from(
    [
        "a",
        "b_c",
        ":x",
        "{",
        "}",
        '"',
        "\\",
        ",",
        "=",
        " ",
        "  ",
        "\t",
        "1",
        "-2.5",
        "NaN",
        "+Inf",
        "le",
        'l="v"',
        '\\"',
        "#",
        "1700000000000",
        "x",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_LINE_PARTS, min_size=1, max_size=14).map("".join))
def test_every_line_the_old_regex_read_is_read_the_same(line: str) -> None:
    line = line.strip()
    old = _old_sample(line)
    if old is None or old[0].endswith("_created") or line.startswith("#"):
        return
    parsed = parse_text(line + "\n")
    assert not parsed.skipped
    (fam,) = parsed.families
    (sample,) = fam.samples
    assert (sample.name, sample.labels) == old[:2]
    assert sample.value == old[2] or (math.isnan(sample.value) and math.isnan(old[2]))


@pytest.mark.parametrize(
    ("line", "parts"),
    [
        ('m{a="x}y",b="1"} 2', ("m", (("a", "x}y"), ("b", "1")), "2", "")),
        ("m  3 1700000000000", ("m", (), "3", "1700000000000")),
        ('m {a="1",} NaN', ("m", (("a", "1"),), "NaN", "")),
        ("m +Inf -5", ("m", (), "+Inf", "-5")),
        ("m\t-Inf", ("m", (), "-Inf", "")),
    ],
)
def test_sample_line_parts(line: str, parts: tuple[object, ...]) -> None:
    got = scan_sample_line(line)
    assert isinstance(got, SampleLine)
    assert (got.name, got.labels, got.value, got.timestamp) == parts


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("a" + " " * 4000 + "1" + " " * 4000 + "1" + " " * 4000 + "{", "is not '<name>"),
        ('m{a="' + "\\\\" * 5000 + "} 1", "malformed labels"),
        ('m{a="' + " " * 20_000 + '"' + " " * 20_000, "malformed labels"),
        ("m{" + 'a="b",' * 3000 + "c} 1", "malformed labels"),
        ("m 1 NaN", "timestamp 'NaN' that is not a finite number"),
        ('m 1 # {t="x"} 1', "is not '<name>"),  # no exemplars in Prometheus text
        ("m{a=x} 1", "malformed labels"),
        ("m{a} 1", "malformed labels"),
        ('m{a="1" b="2"} 1', "malformed labels"),
    ],
)
def test_hostile_and_malformed_lines_are_skipped_with_the_reason(line: str, reason: str) -> None:
    result = parse_text(f"ok 1\n{line}\n")
    (skipped,) = result.skipped
    assert reason in skipped.reason


def test_exemplars_are_read_past_when_the_openmetrics_parser_refuses_the_body() -> None:
    text = (
        "# TYPE h histogram\n"
        'h_bucket{le="0.1"} 3 # {trace_id="abc"} 0.05 1700000000.5\n'
        'h_bucket{le="+Inf"} 4 1700000001 # {trace_id="d e"} 0.5\n'
        "h_count 4\nh_sum 0.3\n"
        'h_bucket{le="1"} 4 # {trace_id=} 0.5\n'
        "not a line\n"
        "# EOF\n"
    )
    result = parse_text(text, content_type="application/openmetrics-text")
    (fam,) = result.families
    assert {s.label("le"): s.value for s in fam.samples if s.name == "h_bucket"} == {
        "0.1": 3.0,
        "+Inf": 4.0,
    }
    assert result.skipped[0].reason.startswith("has a malformed exemplar")


def test_a_parse_past_its_deadline_stops_with_the_reason() -> None:
    body = "".join(f'm{{i="{i}"}} 1\n' for i in range(1000))
    with pytest.raises(SourceError, match=r"parsing http://x/metrics outlasted the scrape timeout"):
        PromTextParser().parse(body, source="http://x/metrics", deadline=time.monotonic() - 1.0)
    assert (
        len(PromTextParser().parse(body, deadline=time.monotonic() + 600).families[0].samples)
        == 1000
    )


def test_long_lines_are_parsed_but_not_remembered() -> None:
    parser = PromTextParser()
    for n in range(50):
        long_label = "v" * (2000 + n)
        parser.parse(f'm{{a="{long_label}"}} 1\n# HELP m {long_label}\nm2 1\n')
    assert len(parser._heads) == 1 and len(parser._comments) == 0
