"""The incident of ``incident.py`` through the exported rules in Prometheus: it pages at the
same minute as the evaluator, under the same alert name and labels, in Prometheus' rule
engine (``promtool test rules``) and in a real Prometheus server holding the incident
(backfilled with ``promtool tsdb create-blocks-from openmetrics``) asked for the alert's
expression at each minute."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml
from _tools import require_binary
from alert_series import histogram
from incident import FAMILY, SLO, STEP_S, cumulative
from prometheus_server import backfill, serving

from slotune.collector.alerts.evaluator import RuleState, evaluate_all
from slotune.collector.alerts.notify import alert_name
from slotune.collector.alerts.promrules import prometheus_rules
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.metrics import PromClient
from slotune.collector.store import Store, register_target, write_samples

SLOW_MINUTES = 20


def evaluator_pages(store: Store) -> tuple[int, dict[str, str]]:
    """The evaluator over the incident: its first paging minute and the alert's labels."""
    points = cumulative(SLOW_MINUTES)
    register_target(store, "a", "vllm", "")
    write_samples(store, histogram("a", "ttft", [(t, {"0.5": g, "+Inf": n}) for t, g, n in points]))
    apply_slos(store, [SLO])
    states = {}
    for minute in range(len(points)):
        (status,) = evaluate_all(store, minute * STEP_S)
        states[minute] = status
    paging = [m for m, s in states.items() if s.state is RuleState.FIRING]
    first = paging[0]
    assert first == 129  # the ninth slow minute, as incident.py works out
    assert paging == list(range(first, len(points)))
    status = states[first]
    return first, {"alertname": alert_name(status.rule, status.kind), **status.labels}


def test_prometheus_pages_at_the_evaluators_minute(store: Store, tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    first, labels = evaluator_pages(store)
    points = cumulative(SLOW_MINUTES)

    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(prometheus_rules([SLO], "vllm", {"ttft": [0.1, 0.5, 1.0]})))

    def expected(minute: int) -> list[dict[str, object]]:
        if minute < first:
            return []
        return [
            {
                "exp_labels": {k: v for k, v in labels.items() if k != "alertname"},
                "exp_annotations": {
                    "summary": f"SLO {SLO.name} ({SLO.spec}) is burning its error budget"
                },
            }
        ]

    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f'{FAMILY}{{le="0.5"}}',
                        "values": " ".join(f"{g:g}" for _, g, _ in points),
                    },
                    {
                        "series": f'{FAMILY}{{le="+Inf"}}',
                        "values": " ".join(f"{n:g}" for _, _, n in points),
                    },
                ],
                "alert_rule_test": [
                    {
                        "eval_time": f"{m}m",
                        "alertname": labels["alertname"],
                        "exp_alerts": expected(m),
                    }
                    for m in (60, first - 2, first - 1, first, first + 1, len(points) - 1)
                ],
            }
        ],
    }
    tests = tmp_path / "tests.yml"
    tests.write_text(yaml.safe_dump(test))
    result = subprocess.run(
        [promtool, "test", "rules", str(tests)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_prometheus_server_pages_at_the_evaluators_minute(store: Store, tmp_path: Path) -> None:
    first, labels = evaluator_pages(store)
    points = cumulative(SLOW_MINUTES)
    # the incident, a few hours ago, as Prometheus would have scraped it
    base = (int(time.time()) // 3600 - 6) * 3600
    lines = [f"# TYPE {FAMILY} unknown"]
    for t, good, total in points:
        lines.append(f'{FAMILY}{{le="0.5"}} {good:g} {base + t:.0f}')
        lines.append(f'{FAMILY}{{le="+Inf"}} {total:g} {base + t:.0f}')
    openmetrics = tmp_path / "incident.om"
    openmetrics.write_text("\n".join([*lines, "# EOF", ""]))
    tsdb = tmp_path / "tsdb"
    backfill(openmetrics, tsdb)
    # the alerting rule's expression with its recording rules written out, so the server
    # answers for any past minute (rules themselves only evaluate from now on)
    (group,) = prometheus_rules([SLO], "vllm", {"ttft": [0.1, 0.5, 1.0]})["groups"]
    records = {r["record"]: r["expr"] for r in group["rules"] if "record" in r}
    (alert,) = [r for r in group["rules"] if r.get("alert") == labels["alertname"]]
    expr = alert["expr"]
    for name, record_expr in records.items():
        expr = expr.replace(f'{name}{{slo="{SLO.name}"}}', f"({record_expr})")
    assert "slotune:" not in expr
    with serving(tsdb) as url:

        def pages(minute: int) -> bool:
            query = urllib.parse.urlencode({"query": expr, "time": base + minute * STEP_S})
            with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=60) as r:
                answer = json.load(r)
            assert answer["status"] == "success", answer
            return bool(answer["data"]["result"])

        minutes = (60, first - 2, first - 1, first, first + 1, len(points) - 1)
        assert [pages(m) for m in minutes] == [m >= first for m in minutes]
        # the evaluator reading the same server through the metrics contract
        client = PromClient(url)
        states = [evaluate_all(store, base + m * STEP_S, metrics=client)[0] for m in minutes]
        client.close()
        assert [s.state is RuleState.FIRING for s in states] == [m >= first for m in minutes]
