"""The incident of ``incident.py`` through the exported rules in Prometheus' own rule engine
(``promtool test rules``): it pages at the same minute as the evaluator, under the same
alert name and labels."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from _tools import require_binary
from alert_series import histogram
from incident import FAMILY, SLO, STEP_S, cumulative

from slotune.collector.alerts.evaluator import RuleState, evaluate_all
from slotune.collector.alerts.notify import alert_name
from slotune.collector.alerts.promrules import prometheus_rules
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.store import Store, register_target, write_samples

SLOW_MINUTES = 20


def test_prometheus_pages_at_the_evaluators_minute(store: Store, tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
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
    labels = {"alertname": alert_name(status.rule, status.kind), **status.labels}

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
