"""``slo export --format grafana``: every panel's query, run on a real Prometheus holding
engine traffic, returns data."""

from __future__ import annotations

import json

import pytest
from fleet_traffic import AT_TS
from test_sli_contract import SLOS

from slotune.collector.alerts.grafana import fleet_dashboard, slo_dashboard
from slotune.collector.metrics import PromClient

BOUNDS = {"ttft": [0.1, 0.5, 1.0], "itl": [0.025, 0.05, 0.1], "tpot": [0.025, 0.05, 0.1]}
# the SLOs on the vLLM series of the traffic (the others select SGLang or a job/instance);
# rules use vLLM's own bounds, and the one interpolating reads a bound the traffic lacks
ON_VLLM = [s for s in SLOS if s.selector.target is None and not s.interpolate]


def _exprs(board: str) -> list[str]:
    panels = json.loads(board)["panels"]
    return [t["expr"] for p in panels for t in p.get("targets") or []]


@pytest.mark.prometheus
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["slos", "fleet"])
def test_every_panel_query_returns_data(prometheus: PromClient, kind: str) -> None:
    board = (
        slo_dashboard(ON_VLLM, "vllm", {**BOUNDS, "e2e": [1.0, 5.0, 10.0]})
        if kind == "slos"
        else fleet_dashboard("vllm")
    )
    exprs = _exprs(board)
    assert exprs
    for expr in exprs:
        found = prometheus.query(expr.replace("$__rate_interval", "5m"), AT_TS)
        assert found, expr
