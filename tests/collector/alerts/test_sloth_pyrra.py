"""Sloth and Pyrra SLO files: their own examples are refused in one line naming what slotune
cannot evaluate; the same files over engine metrics import as slotune SLOs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from slotune.collector.alerts.policy import SRE_WORKBOOK
from slotune.collector.alerts.slo_files import load_slo_documents
from slotune.collector.errors import SLOSpecError
from slotune.collector.slo import SLI, Selector
from slotune.collector.store import upgrade
from slotune.ui.cli import app

DATA = Path(__file__).resolve().parents[2] / "data"
SLOTH = DATA / "sloth" / "getting-started.yml"
PYRRA_ERRORS = DATA / "pyrra" / "apiserver-request-errors.yaml"
PYRRA_LATENCY = DATA / "pyrra" / "apiserver-request-latency.yaml"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            SLOTH,
            "getting-started.yml:17: Sloth SLO 'myservice-requests-availability': "
            "slos.0.sli.events.error_query: 'sum(rate(http_request_duration_seconds_count",
        ),
        (
            PYRRA_ERRORS,
            "apiserver-request-errors.yaml:14: Pyrra SLO 'apiserver-read-response-errors': "
            "spec.indicator.ratio.errors.metric: 'apiserver_request_total",
        ),
        (
            PYRRA_LATENCY,
            "apiserver-request-latency.yaml:14: Pyrra SLO 'apiserver-read-resource-request-"
            "latency': spec.indicator.latency.success.metric:",
        ),
    ],
)
def test_their_own_examples_are_one_line_naming_what_is_unsupported(
    path: Path, expected: str, sqlite_url: str
) -> None:
    upgrade(sqlite_url)
    result = CliRunner().invoke(app, ["--db", sqlite_url, "slo", "apply", str(path)])
    message = " ".join(result.output.split())
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert expected in message and "names no engine metric slotune knows" in message, message
    assert "write e.g. spec:" in message


def test_the_suggested_slo_says_the_same_thing() -> None:
    with pytest.raises(SLOSpecError, match=r"spec: error_rate<=0\.1% in a slotune SLO file"):
        load_slo_documents(SLOTH)
    with pytest.raises(SLOSpecError, match=r"spec: e2e:p99<=1000ms in a slotune SLO file"):
        load_slo_documents(PYRRA_LATENCY)


def test_sloth_over_engine_metrics_imports(tmp_path: Path) -> None:
    text = SLOTH.read_text().replace(
        'http_request_duration_seconds_count{job="myservice",code=~"(5..|429)"}',
        'vllm:request_success_total{model_name="llama",finished_reason="abort"}',
    )
    text += """  - name: "latency"
    objective: 99
    sli:
      events:
        error_query: sum(rate(vllm:e2e_request_latency_seconds_count[{{.window}}])) - sum(rate(vllm:e2e_request_latency_seconds_bucket{le="2.5"}[{{.window}}]))
        total_query: sum(rate(vllm:e2e_request_latency_seconds_count[{{.window}}]))
    alerting:
      page_alert:
        disable: true
"""
    path = tmp_path / "sloth.yml"
    path.write_text(text)
    errors, latency = load_slo_documents(path)
    assert (errors.name, errors.sli, errors.threshold) == (
        "myservice-requests-availability",
        SLI.ERROR_RATE,
        pytest.approx(0.001),
    )
    assert errors.selector == Selector(model="llama") and errors.window_s == 30 * 86400
    assert errors.alerting.labels == {
        "owner": "myteam",
        "repo": "myorg/myservice",
        "tier": "2",
        "category": "availability",
    }
    assert (latency.spec, latency.objective) == ("e2e:p99<=2500ms", pytest.approx(0.99))
    assert latency.alerting.windows == tuple(w for w in SRE_WORKBOOK if w.severity == "ticket")


def test_pyrra_over_engine_metrics_imports(tmp_path: Path) -> None:
    text = PYRRA_LATENCY.read_text().replace(
        'apiserver_request_duration_seconds_bucket{job="apiserver",scope=~"resource|",'
        'verb=~"LIST|GET",le="1"}',
        'vllm:time_to_first_token_seconds_bucket{model_name="llama",le="0.5"}',
    )
    path = tmp_path / "pyrra.yaml"
    path.write_text(text)
    (slo,) = load_slo_documents(path)
    assert (slo.name, slo.spec, slo.window_s) == (
        "apiserver-read-resource-request-latency",
        "ttft:p99<=500ms",
        14 * 86400,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "version: prometheus/v1\nservice: s\nslos:\n  - name: a\n    objective: 99\n"
            "    sli:\n      raw:\n        error_ratio_query: x\n",
            "s.yaml:7: Sloth SLO 's-a': slos.0.sli.raw: a precomputed error ratio",
        ),
        (
            "version: prometheus/v1\nservice: s\nslos:\n  - name: a\n    objective: 100\n",
            "slos.0.objective: 100 must be a percentage between 0 and 100",
        ),
        (
            "apiVersion: pyrra.dev/v1alpha1\nkind: ServiceLevelObjective\nmetadata:\n  name: a\n"
            "spec:\n  target: '99'\n  window: 2w\n  indicator:\n    bool_gauge:\n"
            "      metric: up\n",
            "Pyrra SLO 'a': spec.indicator: bool_gauge: slotune reads the ratio and latency",
        ),
        (
            "apiVersion: pyrra.dev/v1alpha1\nkind: ServiceLevelObjective\nmetadata:\n  name: a\n"
            "spec:\n  target: x\n",
            "spec.target: 'x' must be a percentage",
        ),
        ("slos:\n  - name: a\n    sli: {events: {}}\n", "give either 'spec'"),
    ],
)
def test_what_does_not_map_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SLOSpecError) as e:
        load_slo_documents(path)
    assert expected in str(e.value)


def test_names_are_checked_as_slotune_names(tmp_path: Path) -> None:
    query = 'sum(rate(vllm:request_success_total{finished_reason="abort"}[5m]))'
    body = "    objective: 99\n    sli:\n      events:\n        error_query: " + query + "\n"
    path = tmp_path / "s.yaml"
    path.write_text("version: prometheus/v1\nservice: S\nslos:\n  - name: a\n" + body)
    with pytest.raises(SLOSpecError, match="'S-a' is not a slotune SLO name"):
        load_slo_documents(path)
    path.write_text("version: prometheus/v1\nslos:\n  - name: a\n" + body + "  - name: a\n" + body)
    with pytest.raises(SLOSpecError, match="two SLOs are named 'a'"):
        load_slo_documents(path)
