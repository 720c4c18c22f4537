"""The SLI contract: every SLI read from the store (filled by the agent's own sources) and
from a real Prometheus holding the same traffic gives the same good / total and burn rates."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable

import pytest
from _tools import free_port
from fleet_traffic import AT_TS
from typer.testing import CliRunner

from slotune.collector.alerts.evaluator import RuleState, evaluate_all
from slotune.collector.alerts.sli import SliReader
from slotune.collector.alerts.sli_prom import PromSliReader
from slotune.collector.alerts.slo_rules import apply_slos
from slotune.collector.alerts.status import SloStatus, slo_status, status_windows
from slotune.collector.errors import MetricsUnavailable
from slotune.collector.metrics import PromClient, Series
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


class _Counting(PromClient):
    """A client that counts its queries and refuses those ``refuse`` names (a query the
    server cannot answer)."""

    def __init__(self, base_url: str, refuse: Callable[[str], bool] = lambda _: False) -> None:
        super().__init__(base_url)
        self.refuse = refuse
        self.sent: list[str] = []

    @property
    def queries(self) -> int:
        return len(self.sent)

    def query(self, expr: str, at_ts: float) -> list[Series]:
        self.sent.append(expr)
        if self.refuse(expr):
            raise MetricsUnavailable(f"metrics API {self.shown_url} refused the query")
        return super().query(expr, at_ts)


def _figures(st: SloStatus) -> list[float | None]:
    return [
        st.num_good,
        st.num_total,
        st.budget_left,
        st.newest_sample_ts,
        *(b.burn_rate for b in st.burns),
    ]


@pytest.mark.prometheus
@pytest.mark.slow
def test_a_round_read_ahead_reads_what_each_slo_reads_alone(
    filled: Store, prometheus: PromClient
) -> None:
    """The round's grouped queries, split per selector, give each SLO what its own queries
    give; after the read-ahead no SLO queries again."""
    client = _Counting(prometheus.base_url)
    ahead = PromSliReader(client, AT_TS)
    ahead.prefetch([(slo, status_windows(slo)) for slo in SLOS])
    queries = client.queries
    for slo in SLOS:
        alone = slo_status(filled, slo, AT_TS, reader=PromSliReader(prometheus, AT_TS))
        shared = slo_status(filled, slo, AT_TS, reader=ahead)
        assert _figures(shared) == pytest.approx(_figures(alone), rel=1e-9, abs=1e-12), slo.name
        assert (shared.note, shared.firing) == (alone.note, alone.firing)
    assert client.queries == queries
    client.close()


@pytest.mark.prometheus
@pytest.mark.slow
def test_a_rounds_queries_do_not_grow_with_its_slos(prometheus: PromClient) -> None:
    many = parse_slo_yaml(
        "slos:\n"
        + "".join(
            f"  - {{name: s{k}, spec: '{spec}', window: 2h, selector: {{target: {target}}}, "
            f"alerting: {{windows: [{WINDOWS}]}}}}\n"
            for k, (spec, target) in enumerate(
                (spec, f"{job}/127.0.0.{i}:{port}")
                for spec in ("ttft:p99<=500ms", "error_rate<=1%")
                for job, port in (("vllm", 8000), ("sglang", 30000))
                for i in range(1, 26)
            )
        )
    )
    counted = []
    for slos in ([many[0], many[-1]], many):
        client = _Counting(prometheus.base_url)
        PromSliReader(client, AT_TS).prefetch([(slo, status_windows(slo)) for slo in slos])
        counted.append(client.queries)
        client.close()
    assert counted[0] == counted[1] == 2 * 5  # per SLI: the four windows and the newest sample


@pytest.mark.prometheus
@pytest.mark.slow
def test_a_refused_query_makes_only_its_rules_no_data(
    filled: Store, prometheus: PromClient
) -> None:
    """A grouped query that fails is read SLO by SLO; an SLO whose own query fails too is
    no data, never ok, and the round goes on."""
    apply_slos(filled, SLOS)
    want = {s.rule: s.state for s in evaluate_all(filled, AT_TS, metrics=prometheus)}
    assert RuleState.FIRING in want.values()
    sglang = _Counting(prometheus.base_url, refuse=lambda expr: ":30000" in expr)
    got = {s.rule: s.state for s in evaluate_all(filled, AT_TS, metrics=sglang)}
    for rule, state in got.items():
        wanted = RuleState.NO_DATA if "-sglang:" in rule else want[rule]
        assert state is wanted, rule
    sglang.close()
