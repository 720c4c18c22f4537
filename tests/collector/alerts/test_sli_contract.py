"""The SLI contract: every SLI read from the store (filled by the agent's own sources) and
from a real Prometheus holding the same traffic gives the same good / total and burn rates."""

from __future__ import annotations

import json
import math
import time

import pytest
from _tools import free_port
from fleet_traffic import AT_TS
from typer.testing import CliRunner

from slotune.collector.alerts.evaluator import RuleState, evaluate_all
from slotune.collector.alerts.sli import SliReader
from slotune.collector.alerts.sli_prom import PromSliReader
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.alerts.status import SloStatus, slo_status
from slotune.collector.metrics import PromClient
from slotune.collector.slo import SLO, parse_slo_yaml
from slotune.collector.store import Store
from slotune.collector.views import slo_figures
from slotune.ui.cli import app

WINDOWS = "{severity: page, long: 1h, short: 5m, factor: 14.4}, {severity: ticket, long: 2h, short: 30m, factor: 3}"
SLOS = parse_slo_yaml(
    "slos:\n"
    + "".join(
        f"  - {{name: {name}, spec: '{spec}', window: 2h, {extra}"
        f"alerting: {{windows: [{WINDOWS}]}}}}\n"
        for name, spec, extra in (
            ("ttft-bound", "ttft:p99<=500ms", ""),
            ("ttft-between", "ttft:p99<=700ms", ""),
            ("ttft-interp", "ttft:p99<=700ms", "interpolate: true, "),
            ("ttft-vllm", "ttft:p99<=500ms", "selector: {target: vllm/127.0.0.1:8000}, "),
            ("ttft-sglang", "ttft:p99<=1s", "selector: {target: sglang/127.0.0.1:30000}, "),
            ("ttft-model", "ttft:p90<=100ms", "selector: {model: m}, "),
            ("itl", "itl:p95<=50ms", ""),
            ("tpot", "tpot:p90<=100ms", ""),
            ("e2e", "e2e:p99<=10s", ""),
            ("errors", "error_rate<=1%", ""),
            ("errors-sglang", "error_rate<=5%", "selector: {target: sglang/127.0.0.1:30000}, "),
        )
    )
)


def _both(store: Store, client: PromClient, slo: SLO) -> tuple[SloStatus, SloStatus]:
    sql = slo_status(store, slo, AT_TS, reader=SliReader(store, AT_TS))
    prom = slo_status(store, slo, AT_TS, reader=PromSliReader(client, AT_TS))
    return sql, prom


@pytest.mark.prometheus
@pytest.mark.slow
@pytest.mark.parametrize("slo", SLOS, ids=[s.name for s in SLOS])
def test_store_and_prometheus_agree(filled: Store, prometheus: PromClient, slo: SLO) -> None:
    sql, prom = _both(filled, prometheus, slo)
    assert sql.num_total and sql.num_total > 0
    assert prom.num_total == pytest.approx(sql.num_total, rel=1e-9)
    assert prom.num_good == pytest.approx(sql.num_good, rel=1e-9)
    assert prom.budget_left == pytest.approx(sql.budget_left, rel=1e-9)
    assert [b.window_s for b in prom.burns] == [b.window_s for b in sql.burns]
    for p, s in zip(prom.burns, sql.burns, strict=True):
        assert p.burn_rate == pytest.approx(s.burn_rate, rel=1e-9, abs=1e-12), p.window_s
    assert prom.firing == sql.firing
    assert prom.note == sql.note
    assert prom.has_data and sql.has_data


@pytest.mark.prometheus
@pytest.mark.slow
def test_the_incident_burns_and_the_bound_note_is_the_stores(
    filled: Store, prometheus: PromClient
) -> None:
    by_name = {s.name: s for s in SLOS}
    sql, prom = _both(filled, prometheus, by_name["ttft-between"])
    assert prom.note is not None and "not a bucket bound" in prom.note
    sql, prom = _both(filled, prometheus, by_name["errors"])
    assert prom.firing == sql.firing == ("ticket",)  # 30 slow minutes: not yet a page
    assert not math.isnan(prom.burns[0].burn_rate or 0.0)


def test_an_unreachable_prometheus_makes_slo_rules_no_data(store: Store) -> None:
    apply_slos(store, SLOS[:2])
    client = PromClient(f"http://127.0.0.1:{free_port()}")
    statuses = evaluate_all(store, AT_TS, metrics=client)
    assert statuses and all(s.state is RuleState.NO_DATA for s in statuses)
    assert all("unreachable" in s.message for s in statuses)


@pytest.mark.prometheus
@pytest.mark.slow
def test_slo_figures_and_alerts_from_only_a_prometheus_url(
    store_url: str, filled: Store, prometheus: PromClient
) -> None:
    """SLOs in the store, metrics in Prometheus: the same figures and alert states as the
    store's own samples give."""
    apply_slos(filled, SLOS)
    from_prom = slo_figures(filled, end_ts=AT_TS, metrics=prometheus)
    from_store = slo_figures(filled, end_ts=AT_TS)
    assert [f["status"]["budget_left"] for f in from_prom] == pytest.approx(
        [f["status"]["budget_left"] for f in from_store]
    )
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(AT_TS))
    runs = [
        CliRunner().invoke(app, [*metrics, "alerts", "evaluate", "--at", at, "--json"])
        for metrics in (["--db", store_url, "--metrics", prometheus.base_url], ["--db", store_url])
    ]
    assert [r.exit_code for r in runs] == [0, 0], runs[0].output + runs[1].output
    prom, sql = ([(s["rule"], s["state"]) for s in json.loads(r.stdout)] for r in runs)
    assert prom == sql
    assert ("errors:ticket", "firing") in prom
