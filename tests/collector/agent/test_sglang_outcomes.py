"""SGLang's finished and aborted request counters become ``requests_finished`` by reason."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_helpers import data_text

from slotune.collector.agent.base import Family, Response, Scrape
from slotune.collector.agent.sglang import SglangSource

REAL_DUMP = Path(__file__).parents[2] / "data" / "sglang" / "metrics-0.5.23.txt"
MODEL = 'model_name="meta-llama/Llama-3.1-8B-Instruct"'
# The two counters as SGLang's TokenizerMetricsCollector declares them
# (python/sglang/srt/metrics/collector.py), after traffic with a few aborts.
COUNTERS = f"""\
# HELP sglang:num_requests_total Number of requests processed.
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{{{MODEL}}} 4210.0
# HELP sglang:num_aborted_requests_total Number of requests aborted.
# TYPE sglang:num_aborted_requests_total counter
sglang:num_aborted_requests_total{{{MODEL}}} 37.0
"""


class Body:
    def __init__(self, text: str, content_type: str = "") -> None:
        self.text, self.content_type = text, content_type

    async def get(self, url: str) -> Response:
        return Response(self.text, self.content_type)


def scrape(text: str, content_type: str = "") -> Scrape:
    return asyncio.run(SglangSource(["u"]).collect(Body(text, content_type)))


def by_reason(scrape: Scrape) -> dict[str, float]:
    (fam,) = [f for f in scrape.canonical if f.name == "requests_finished"]
    out: dict[str, float] = {}
    for s in fam.samples:
        out[s.label("finished_reason")] = out.get(s.label("finished_reason"), 0.0) + s.value
    return out


def family(scrape: Scrape, name: str) -> Family:
    return next(f for f in scrape.canonical if f.name == name)


def test_finished_and_aborted_requests_get_their_reason_and_keep_their_labels() -> None:
    doc = data_text("sglang_production_metrics_doc.prom")
    result = scrape(doc + COUNTERS)
    assert by_reason(result) == {"finished": 4210.0, "abort": 37.0}
    for s in family(result, "requests_finished").samples:
        assert s.label("model_name") == "meta-llama/Llama-3.1-8B-Instruct"
    # the documentation example's other families map as before
    assert {"ttft", "e2e", "kv_usage", "generation_tokens"} <= {f.name for f in result.canonical}


def test_a_real_server_before_its_first_abort_has_finished_requests_only() -> None:
    # SGLang 0.5.23 after two requests: the aborted counter has no series yet
    result = scrape(REAL_DUMP.read_text())
    assert by_reason(result) == {"finished": 2.0}
    assert {s.label("is_streaming") for s in family(result, "requests_finished").samples} == {
        "false",
        "true",
    }


def test_openmetrics_names_the_counter_families_without_total() -> None:
    om = (
        COUNTERS.replace("TYPE sglang:num_requests_total", "TYPE sglang:num_requests")
        .replace("HELP sglang:num_requests_total", "HELP sglang:num_requests")
        .replace("TYPE sglang:num_aborted_requests_total", "TYPE sglang:num_aborted_requests")
        .replace("HELP sglang:num_aborted_requests_total", "HELP sglang:num_aborted_requests")
        + "# EOF\n"
    )
    result = scrape(om, "application/openmetrics-text; version=1.0.0; charset=utf-8")
    assert by_reason(result) == {"finished": 4210.0, "abort": 37.0}


def test_no_request_counter_gives_no_requests_finished() -> None:
    result = scrape(data_text("sglang_production_metrics_doc.prom"))
    assert "requests_finished" not in {f.name for f in result.canonical}
