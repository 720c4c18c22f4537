"""SGLang's error-rate SLO: its aborted and finished counters, through the store and the
evaluator, and as exported Prometheus rules that promtool evaluates to the same ratio."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from _tools import require_binary

from slotune.collector.alerts.history import import_openmetrics
from slotune.collector.alerts.promrules import error_ratio_expr, prometheus_rules, record_name
from slotune.collector.alerts.sli import SliReader
from slotune.collector.alerts.status import slo_status
from slotune.collector.slo import Selector, parse_slo
from slotune.collector.store import Store

T0 = 1_760_000_000
MODEL = "llama"
FINISHED, ABORTED = "sglang:num_requests_total", "sglang:num_aborted_requests_total"


def history(minutes: int, finished_per_min: int, aborted_per_min: int) -> str:
    """An SGLang server scraped every minute (OpenMetrics, seconds): its two counters."""
    lines = [
        f"# TYPE {FINISHED.removesuffix('_total')} counter",
        f"# TYPE {ABORTED.removesuffix('_total')} counter",
    ]
    for i in range(minutes + 1):
        ts = T0 + 60 * i
        lines.append(f'{FINISHED}{{model_name="{MODEL}"}} {i * finished_per_min} {ts}')
        lines.append(f'{ABORTED}{{model_name="{MODEL}"}} {i * aborted_per_min} {ts}')
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def test_the_evaluator_reads_aborted_over_finished_plus_aborted(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "sglang.om"
    path.write_text(history(30, finished_per_min=97, aborted_per_min=3))
    import_openmetrics(store, path, "sglang-a", "sglang")
    slo = parse_slo("error_rate<=1%", name="sg-errors", selector=Selector(model=MODEL))
    end = T0 + 30 * 60.0
    (counts,) = SliReader(store, end).counts(slo, [20 * 60.0]).counts
    assert counts is not None
    assert counts.total == 2000.0 and counts.error_ratio == 0.03
    assert slo_status(store, slo, end).burns  # the SLO has data: its burn rates exist


def test_the_rule_counts_no_failure_before_the_first_abort() -> None:
    expr = error_ratio_expr(
        parse_slo("error_rate<=1%", selector=Selector(model="m")), "sglang", 300
    )
    aborted = f'(sum(increase({ABORTED}{{model_name="m"}}[5m])) or vector(0))'
    assert expr == f'{aborted} / ({aborted} + sum(increase({FINISHED}{{model_name="m"}}[5m])))'


def test_promtool_computes_the_evaluators_ratio(tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    slo = parse_slo("error_rate<=1%", name="sg-errors")
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(prometheus_rules([slo], "sglang")))
    record = record_name(300)
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    # finished from the start, the first abort at minute 20
                    {"series": f'{FINISHED}{{model_name="m"}}', "values": "0+3x40"},
                    {"series": f'{ABORTED}{{model_name="m"}}', "values": "_x20 1+1x20"},
                ],
                "promql_expr_test": [
                    {
                        "expr": f'{record}{{slo="sg-errors"}}',
                        "eval_time": f"{minute}m",
                        "exp_samples": [{"labels": f'{record}{{slo="sg-errors"}}', "value": v}],
                    }
                    for minute, v in ((10, 0.0), (35, 0.25))
                ],
            }
        ],
    }
    tests = tmp_path / "tests.yml"
    tests.write_text(yaml.safe_dump(test))
    result = subprocess.run(
        [promtool, "test", "rules", str(tests)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
