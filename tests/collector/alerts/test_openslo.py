"""OpenSLO v1 import: the specification's own examples and slotune's example file."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotune.collector.alerts.openslo import parse_openslo
from slotune.collector.alerts.slo_files import load_slo_documents
from slotune.collector.errors import SLOSpecError
from slotune.collector.slo import SLI, BurnWindow, Selector

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "tests" / "data" / "openslo"


def test_the_example_file_imports() -> None:
    ttft, availability = load_slo_documents(ROOT / "examples" / "openslo.yaml")
    assert (ttft.name, ttft.spec, ttft.objective) == ("chat-ttft", "ttft:p99<=500ms", 0.99)
    assert ttft.selector == Selector(pool="chat") and ttft.window_s == 30 * 86400
    assert ttft.alerting.windows == (BurnWindow("page", 3600.0, 300.0, 14.4),)
    assert (availability.sli, availability.threshold) == (SLI.ERROR_RATE, pytest.approx(0.001))
    assert availability.window_s == 28 * 86400 and availability.alerting.windows == ()


@pytest.mark.parametrize(
    ("file", "message"),
    [
        (
            "occurences-slo.yaml",
            "occurences-slo.yaml:17: document 1 (SLO 'search-slo'): "
            "spec.indicator.spec.thresholdMetric.metricSource.type: metric source 'Any' is not "
            "supported",
        ),
        (
            "timeslices-slo.yaml",
            "timeslices-slo.yaml:32: document 1 (SLO 'service-availability'): "
            "spec.budgetingMethod: 'Timeslices' is not supported",
        ),
        (
            "readme-inline-sli.yaml",
            "document 1 (SLO 'foo-slo'): spec.budgetingMethod: is required",
        ),
        (
            "readme-alerts.yaml",
            "readme-alerts.yaml:13: document 1 (AlertCondition 'cpu-usage-breach'): "
            "spec.condition.alertAfter: is not supported",
        ),
    ],
)
def test_the_specification_examples_fail_naming_document_field_and_why(
    file: str, message: str
) -> None:
    with pytest.raises(SLOSpecError) as e:
        load_slo_documents(SPEC / file)
    assert message in str(e.value)


SLO_WITH = """apiVersion: openslo/v1
kind: SLO
metadata: {{name: s}}
spec:
  budgetingMethod: Occurrences
  timeWindow: [{{duration: 1w, isRolling: true}}]
  indicator:
    metadata: {{name: i}}
    spec:
{indicator}
  objectives: [{objective}]
"""


def test_prometheus_threshold_and_ratio_sources() -> None:
    threshold = """      thresholdMetric:
        metricSource:
          type: Prometheus
          spec:
            query: histogram_quantile(0.95, sum by (le) (rate(sglang:e2e_request_latency_seconds_bucket{model_name="m"}[5m])))"""
    (slo,) = parse_openslo(
        SLO_WITH.format(indicator=threshold, objective="{op: lte, value: 20, target: 0.95}")
    )
    assert (slo.spec, slo.objective, slo.selector) == ("e2e:p95<=20s", 0.95, Selector(model="m"))
    ratio = """      ratioMetric:
        counter: true
        good: {metricSource: {type: prometheus, spec: {query: 'vllm:inter_token_latency_seconds_bucket{le="0.05"}'}}}
        total: {metricSource: {type: prometheus, spec: {query: 'vllm:inter_token_latency_seconds_count'}}}"""
    (slo,) = parse_openslo(SLO_WITH.format(indicator=ratio, objective="{targetPercent: 99.5}"))
    assert (slo.spec, slo.objective) == ("itl:p99.5<=50ms", 0.995)


def test_refusals() -> None:
    unknown = """      thresholdMetric:
        metricSource: {type: prometheus, spec: {query: 'http_requests_total'}}"""
    with pytest.raises(SLOSpecError, match="query: names no engine metric slotune knows"):
        parse_openslo(
            SLO_WITH.format(indicator=unknown, objective="{op: lte, value: 1, target: 0.9}")
        )
    gt = """      thresholdMetric:
        metricSource: {type: slotune, spec: {sli: ttft}}"""
    with pytest.raises(SLOSpecError, match=r"objectives\.0\.op: 'gt' is not supported"):
        parse_openslo(SLO_WITH.format(indicator=gt, objective="{op: gt, value: 1, target: 0.9}"))
    with pytest.raises(SLOSpecError, match="kind 'Budget' is not an OpenSLO v1 kind"):
        parse_openslo("apiVersion: openslo/v1\nkind: Budget\nmetadata: {name: b}\n")
    raw = """      ratioMetric:
        rawType: success
        raw: {metricSource: {type: slotune, spec: {sli: ttft}}}"""
    with pytest.raises(
        SLOSpecError, match=r"ratioMetric\.raw: precomputed ratios are not supported"
    ):
        parse_openslo(SLO_WITH.format(indicator=raw, objective="{target: 0.9}"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: openslo/v1\nkind: SLO\nmetadata: {name: s}\nspec: [1]\n",
            "spec: must be a mapping",
        ),
        (
            "apiVersion: openslo/v1\nkind: AlertCondition\nmetadata: {name: c}\n"
            "spec: {severity: page, condition: {threshold: .inf, lookbackWindow: 1h}}\n",
            "not a finite number",
        ),
        (
            "apiVersion: openslo/v1\nkind: SLO\nmetadata: {name: s}\nspec: {budgetingMethod: "
            "Occurrences, indicatorRef: [1], objectives: [{target: 0.9}]}\n",
            "refers to SLI [1], which is not in the file",
        ),
    ],
)
def test_malformed_documents_are_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(SLOSpecError) as e:
        parse_openslo(text)
    assert message in str(e.value)
