"""Every agent parser and source fed hostile text: only SourceError ever escapes, and what a
scrape gives can be encoded for the store."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import DEEP_JSON, EXPOSITIONS, FUZZ, JSON_VALUES, json_text

from slotune.collector.agent.base import Response, SourceKind
from slotune.collector.agent.encode import SampleEncoder
from slotune.collector.agent.promtext import parse_text
from slotune.collector.agent.registry import SOURCES
from slotune.collector.agent.sampleline import SampleLine, scan_sample_line
from slotune.collector.agent.snapshot import snapshot_from_scrape
from slotune.collector.agent.trtllm import parse_iteration_stats
from slotune.collector.alerts.history import split_by_timestamp
from slotune.collector.errors import ConfigError, SourceError

HTTP_SOURCES = [k for k in SourceKind if k is not SourceKind.NVML]


class _Fetch:
    def __init__(self, text: str, content_type: str) -> None:
        self.response = Response(text, content_type)

    async def get(self, url: str) -> Response:
        return self.response


@FUZZ
@given(EXPOSITIONS | st.text(), st.sampled_from(["", "application/openmetrics-text"]))
def test_prometheus_text_parser(text: str, content_type: str) -> None:
    with contextlib.suppress(SourceError):
        parse_text(text, content_type=content_type)


@FUZZ
@given(EXPOSITIONS | st.text(), st.booleans())
def test_sample_line_reader(text: str, openmetrics: bool) -> None:
    for line in text.splitlines():
        line = line.strip()
        parts = scan_sample_line(line, openmetrics=openmetrics)
        assert isinstance(parts, str | SampleLine)
        if isinstance(parts, SampleLine):
            assert line[parts.value_at :].startswith(parts.value)


@FUZZ
@given(EXPOSITIONS | st.text(), st.sampled_from(["", "\n# EOF\n"]))
def test_metrics_history_split(text: str, end: str) -> None:
    with contextlib.suppress(ConfigError):
        split_by_timestamp(text + end, "history.om")


@pytest.mark.parametrize("kind", HTTP_SOURCES)
@FUZZ
@given(body=EXPOSITIONS | JSON_VALUES.map(json_text) | DEEP_JSON | st.text())
def test_every_source_and_what_follows_a_scrape(kind: SourceKind, body: str) -> None:
    source = SOURCES[kind]([f"http://127.0.0.1:1/{kind.value}"])
    try:
        scrape = asyncio.run(source.collect(_Fetch(body, "text/plain")))
    except SourceError:
        return
    SampleEncoder(heartbeat_s=0).encode("t", scrape, 1.0)
    if kind.is_engine:
        with contextlib.suppress(SourceError):
            snapshot_from_scrape(kind.value, "http://127.0.0.1:1", scrape, 1.0)


@FUZZ
@given(JSON_VALUES.map(json_text) | DEEP_JSON | st.text())
def test_trtllm_iteration_stats(text: str) -> None:
    with contextlib.suppress(SourceError):
        parse_iteration_stats(text)


def test_the_reported_cases() -> None:
    with pytest.raises(SourceError, match="deeper"):
        parse_iteration_stats("[" * 100_000)
    stats, _ = parse_iteration_stats('[{"iter": 1, "iterLatencyMS": ' + "9" * 400 + "}]")
    assert stats and isinstance(stats[0]["iterLatencyMS"], int)
    fam = 'vllm:time_to_first_token_seconds_bucket{le="abc"} 1\n'
    scrape = asyncio.run(
        SOURCES[SourceKind.VLLM](["u"]).collect(
            _Fetch("# TYPE vllm:time_to_first_token_seconds histogram\n" + fam, "")
        )
    )
    with pytest.raises(SourceError, match="le='abc' is not a number"):
        snapshot_from_scrape("vllm", "u", scrape, 1.0)
