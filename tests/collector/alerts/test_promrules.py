"""The exported Prometheus rules fire exactly when the evaluator does, on the same series."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from _tools import require_binary
from alert_series import histogram

from slotune.collector.alerts.policy import burn_windows
from slotune.collector.alerts.promrules import (
    ALERT_NAME,
    error_ratio_expr,
    prom_duration,
    prometheus_rules,
)
from slotune.collector.alerts.status import slo_status
from slotune.collector.errors import ConfigError
from slotune.collector.slo import SLO, Selector, parse_slo
from slotune.collector.store import Store, register_target, write_samples

STEP_S = 60
# Per minute: 0.7 % slow requests for two hours, then 53 % slow for half an hour.
SEGMENTS = ((120, 99.3, 100.0), (30, 47.0, 100.0))


def cumulative() -> list[tuple[float, float, float]]:
    """(t, good, total) every minute from t = 0."""
    out = [(0.0, 0.0, 0.0)]
    for minutes, good, total in SEGMENTS:
        for _ in range(minutes):
            t, g, n = out[-1]
            out.append((t + STEP_S, g + good, n + total))
    return out


def promtool_series(index: int) -> str:
    return " ".join(f"{p[index]:g}" for p in cumulative())


def test_durations() -> None:
    assert [prom_duration(s) for s in (300, 3600, 86400 * 3, 90, 0.5)] == [
        "5m",
        "1h",
        "3d",
        "90s",
        "500ms",
    ]


def test_engine_names_and_refusals() -> None:
    slo = parse_slo("ttft:p99<=500ms", selector=Selector(model="m"))
    expr = error_ratio_expr(slo, "sglang", 300, [0.25, 0.5, 1.0])
    assert 'sglang:time_to_first_token_seconds_bucket{model_name="m",le="0.5"}[5m]' in expr
    err = error_ratio_expr(parse_slo("error_rate<=1%"), "vllm", 3600)
    assert 'vllm:request_success_total{finished_reason=~"abort|error"}[1h]' in err
    with pytest.raises(ConfigError, match="trtllm exports no itl metric"):
        error_ratio_expr(parse_slo("itl:p95<=50ms"), "trtllm", 300)


def test_promtool_fires_the_same_alerts_as_the_evaluator(store: Store, tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    slo = parse_slo("ttft:p99<=500ms", name="chat-ttft")
    register_target(store, "a", "vllm", "")
    write_samples(
        store,
        histogram("a", "ttft", [(t, {"0.5": g, "+Inf": n}) for t, g, n in cumulative()]),
    )
    eval_minutes = (60, 121, 125, 130, 135, 140, 150)
    expected: dict[int, list[str]] = {}
    for minute in eval_minutes:
        status = slo_status(store, slo, minute * 60.0)
        expected[minute] = sorted(status.firing)
        # no burn rate sits on a factor, where rounding alone could decide
        for c in status.conditions:
            for rate in (c.long.burn_rate, c.short.burn_rate):
                assert rate is None or abs(rate - c.window.factor) > 1e-6
    # the series must exercise the policy: nothing, then ticket, then page as well
    assert expected[60] == [] and expected[150] == ["page", "ticket"]
    assert len({tuple(v) for v in expected.values()}) == 3

    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(prometheus_rules([slo], "vllm", {"ttft": [0.1, 0.5, 1.0]})))
    check = subprocess.run(
        [promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    summary = f"SLO chat-ttft ({slo.spec}) is burning its error budget"
    family = "vllm:time_to_first_token_seconds_bucket"
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'{family}{{le="0.5"}}', "values": promtool_series(1)},
                    {"series": f'{family}{{le="+Inf"}}', "values": promtool_series(2)},
                ],
                "alert_rule_test": [
                    {
                        "eval_time": f"{minute}m",
                        "alertname": ALERT_NAME,
                        "exp_alerts": [
                            {
                                "exp_labels": {"slo": "chat-ttft", "severity": sev},
                                "exp_annotations": {"summary": summary},
                            }
                            for sev in severities
                        ],
                    }
                    for minute, severities in expected.items()
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


def test_windows_scale_in_the_export() -> None:
    slo = SLO(
        **{
            **{f: getattr(parse_slo("e2e:p99<=20s"), f) for f in SLO.__slots__},
            "window_s": 7 * 86400.0,
        }
    )
    records = [
        r["record"] for g in prometheus_rules([slo])["groups"] for r in g["rules"] if "record" in r
    ]
    assert "slotune:slo_error_ratio:rate14m" in records  # 1h x 7/30
    assert len(records) == len({w for c in burn_windows(slo) for w in (c.long_s, c.short_s)})
