from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from alert_series import T0, steady

from slotune.collector.alerts.evaluator import (
    RuleState,
    evaluate_all,
    open_when_reachable,
    run_loop,
)
from slotune.collector.alerts.rules import parse_rule, parse_rules_yaml
from slotune.collector.alerts.slo_rules import save_slo_rules
from slotune.collector.errors import ConfigError, StoreUnavailable
from slotune.collector.slo import parse_slo_yaml
from slotune.collector.store import (
    AlertState,
    SampleIn,
    Store,
    alert_history,
    open_store,
    register_target,
    save_alert_rule,
    save_slos,
    upgrade,
    write_samples,
)


def gauge(target: str, name: str, values: list[tuple[float, float]]) -> list[SampleIn]:
    return [SampleIn(target, name, "gauge", {}, ts, v) for ts, v in values]


def test_shorthand() -> None:
    rule = parse_rule("kv_usage > 0.9 for 5m", name="kv-full")
    assert (rule.metric, rule.op, rule.threshold, rule.for_s) == ("kv_usage", ">", 0.9, 300.0)
    assert parse_rule("prefix_hit_rate < 20%", name="x").threshold == 0.2
    with pytest.raises(ConfigError, match="unknown metric 'kv_used'"):
        parse_rule("kv_used > 1", name="x")
    with pytest.raises(ConfigError, match="not understood"):
        parse_rule("kv_usage is high", name="x")


def test_file_errors_name_the_line_and_field() -> None:
    text = "rules:\n  - name: ok\n    expr: up == 0\n  - name: bad\n    expr: vram > 3\n"
    with pytest.raises(ConfigError, match=r"^rules.yaml:5: field 'expr': unknown metric 'vram'"):
        parse_rules_yaml(text, source="rules.yaml")
    text = "rules:\n  - name: ok\n    expr: up == 0\n    colour: red\n"
    with pytest.raises(ConfigError, match=r"^r.yaml:4: field 'colour': unknown field"):
        parse_rules_yaml(text, source="r.yaml")


def test_for_pending_firing_and_hysteresis(store: Store) -> None:
    register_target(store, "a", "vllm", "")
    values = [(T0 + i * 10, 0.95) for i in range(61)]  # 0.95 for 10 minutes
    values += [(T0 + 610, 0.85), (T0 + 620, 0.7)]
    write_samples(store, gauge("a", "kv_usage", values))
    (rule,) = parse_rules_yaml(
        "rules:\n  - name: kv-full\n    expr: kv_usage > 0.9 for 5m\n    resolve: 0.8\n"
    )
    save_alert_rule(store, rule.to_info())

    def state(at: float) -> RuleState:
        (status,) = evaluate_all(store, at, record=True)
        return status.state

    assert state(T0 + 100) is RuleState.PENDING  # held 100 s of 300
    assert state(T0 + 400) is RuleState.FIRING
    assert state(T0 + 610) is RuleState.FIRING  # 0.85: below 0.9 but above resolve 0.8
    assert state(T0 + 620) is RuleState.OK
    events = [(h.event.state, h.event.ts, h.event.labels["target"]) for h in alert_history(store)]
    assert events == [(AlertState.FIRING, T0 + 400, "a"), (AlertState.RESOLVED, T0 + 620, "a")]


def test_up_and_rates_per_target(store: Store) -> None:
    write_samples(store, gauge("a", "up", [(T0, 1), (T0 + 60, 1)]))
    write_samples(store, gauge("b", "up", [(T0, 1), (T0 + 60, 0)]))
    write_samples(
        store,
        [SampleIn("a", "preemptions", "counter", {}, T0 + i * 60, i * 30.0) for i in range(6)],
    )
    for text, name in (("up == 0", "down"), ("preemption_rate > 0.4", "preempting")):
        save_alert_rule(store, parse_rule(text, name=name).to_info())
    found = {(s.rule, s.labels["target"]): s for s in evaluate_all(store, T0 + 300)}
    assert found[("down", "b")].state is RuleState.FIRING
    assert found[("down", "a")].state is RuleState.OK
    assert found[("preempting", "a")].value == pytest.approx(0.5)
    assert found[("preempting", "a")].state is RuleState.FIRING


def test_slo_rule_fires_and_a_failing_rule_does_not_stop_the_others(store: Store) -> None:
    # 30 % errors for two hours: every page and ticket window burns at 30x
    steady(store, "a", start=T0, end=T0 + 7200, step=60, good_per_step=70, bad_per_step=30)
    slos = parse_slo_yaml("slos:\n  - name: chat-ttft\n    spec: ttft:p99<=500ms\n")
    save_slos(store, slos)
    save_slo_rules(store, slos)
    save_alert_rule(store, parse_rule("kv_usage > 0.9", name="kv").to_info())
    broken = parse_rule("up == 0", name="broken").to_info()
    save_alert_rule(store, replace(broken, metric="nonsense"))
    found = {s.rule: s for s in evaluate_all(store, T0 + 7200, record=True)}
    assert found["chat-ttft:page"].state is RuleState.FIRING
    assert found["chat-ttft:page"].value == pytest.approx(30.0)
    assert found["chat-ttft:ticket"].state is RuleState.FIRING
    assert found["broken"].state is RuleState.ERROR
    assert "unknown metric 'nonsense'" in found["broken"].message


def test_the_loop_survives_an_unreachable_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'gone.db'}"
    upgrade(url)
    with open_store(url) as store:
        store.dispose()
        for suffix in ("", "-wal", "-shm"):
            (tmp_path / f"gone.db{suffix}").unlink(missing_ok=True)
        (tmp_path / "gone.db").mkdir()  # the path now cannot be opened as a database
        rounds: list[int] = []
        assert run_loop(store, max_rounds=3, sleep=lambda _: rounds.append(1)) == 3
    assert len(rounds) == 2
    assert caplog.text.count("alert evaluation skipped") == 3


def test_the_evaluator_waits_for_an_unreachable_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing' / 'store.db'}"  # its directory does not exist
    waits: list[float] = []
    with pytest.raises(StoreUnavailable):
        open_when_reachable(url, retry_s=7.0, max_attempts=3, sleep=waits.append)
    assert waits == [7.0, 7.0]
    (tmp_path / "missing").mkdir()
    upgrade(url)
    with open_when_reachable(url, max_attempts=1) as store:
        assert evaluate_all(store) == []
