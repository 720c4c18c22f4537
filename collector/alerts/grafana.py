"""SLOs and the fleet as Grafana dashboards (JSON), over the same PromQL as the rule export.

Built with ``grafana-foundation-sdk`` (Grafana's own typed builders), so the JSON is what
Grafana's schema expects. Two boards:

- **SLOs**: per SLO, the error budget left over its window, the budget burning down, and each
  burn-rate window of its policy against the alert's threshold (``factor x budget``);
- **fleet**: TTFT, ITL and E2E as heatmaps and p50/p90/p99 per pool and target, KV usage,
  queue, preemptions and prefix-cache hit rate, on ``engine``'s own metric names.

Not built: a tuning board (a study's recommended capacity against the observed load).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from grafana_foundation_sdk.builders import dashboard, heatmap, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from slotune.collector.alerts.policy import burn_windows, error_budget
from slotune.collector.alerts.promrules import (
    engine_rule,
    error_ratio_expr,
    histogram_bounds,
    prom_duration,
    stored_slos,
)
from slotune.collector.slo import SLO
from slotune.collector.store import Store

LATENCY_PANELS = (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "E2E"))
BY = "pool, job, instance"


def _query(expr: str, legend: str = "") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend)


def slo_dashboard(slos: Sequence[SLO], engine: str, bounds: Mapping[str, Sequence[float]]) -> str:
    """The SLO board (JSON) for ``slos`` on ``engine``'s series."""
    board = dashboard.Dashboard("slotune SLOs").uid("slotune-slos").tags(["slotune", "slo"])
    for slo in slos:
        fam_bounds = histogram_bounds(engine, slo, bounds.get(slo.sli.value, ()))
        budget = error_budget(slo)
        period = error_ratio_expr(slo, engine, slo.window_s, fam_bounds)
        left = f"1 - ({period}) / {budget:.10g}"
        board = board.with_row(dashboard.Row(f"{slo.name}: {slo.spec}"))
        board = board.with_panel(
            stat.Panel()
            .title(f"{slo.name}: budget left")
            .unit("percentunit")
            .with_target(_query(left))
        )
        board = board.with_panel(
            timeseries.Panel()
            .title(f"{slo.name}: budget burn-down ({prom_duration(slo.window_s)})")
            .unit("percentunit")
            .with_target(_query(left, "budget left"))
        )
        burns = timeseries.Panel().title(f"{slo.name}: burn rates")
        for c in burn_windows(slo):
            for w in (c.long_s, c.short_s):
                ratio = error_ratio_expr(slo, engine, w, fam_bounds)
                burns = burns.with_target(_query(f"({ratio}) / {budget:.10g}", prom_duration(w)))
            burns = burns.with_target(_query(f"vector({c.factor:g})", f"{c.severity} threshold"))
        board = board.with_panel(burns)
    return JSONEncoder(sort_keys=True, indent=2).encode(board.build())


def fleet_queries(engine: str) -> list[tuple[str, str]]:
    """(panel title, PromQL) of the fleet board on ``engine``'s names."""
    out = []
    for family, label in LATENCY_PANELS:
        bucket = f"{engine_rule(engine, family).source}_bucket"
        out.append((f"{label} heatmap", f"sum by (le) (increase({bucket}[$__rate_interval]))"))
        for q in (0.5, 0.9, 0.99):
            out.append(
                (
                    f"{label} p{q * 100:g}",
                    f"histogram_quantile({q:g}, sum by (le, {BY}) (rate({bucket}[$__rate_interval])))",
                )
            )
    gauge = {
        c: engine_rule(engine, c).source
        for c in ("kv_usage", "requests_running", "requests_waiting")
    }
    out.append(("KV cache usage", f"avg by ({BY}) ({gauge['kv_usage']})"))
    out.append(("queue (waiting)", f"sum by ({BY}) ({gauge['requests_waiting']})"))
    out.append(("running", f"sum by ({BY}) ({gauge['requests_running']})"))
    preempt = engine_rule(engine, "preemptions").source
    out.append(("preemptions/s", f"sum by ({BY}) (rate({preempt}[$__rate_interval]))"))
    hits, queries = (
        engine_rule(engine, "prefix_hits").source,
        engine_rule(engine, "prefix_queries").source,
    )
    out.append(
        (
            "prefix-cache hit rate",
            f"sum by ({BY}) (rate({hits}[$__rate_interval])) / "
            f"sum by ({BY}) (rate({queries}[$__rate_interval]))",
        )
    )
    return out


def fleet_dashboard(engine: str) -> str:
    """The fleet board (JSON) on ``engine``'s series."""
    board = dashboard.Dashboard("slotune fleet").uid("slotune-fleet").tags(["slotune", "fleet"])
    for title, expr in fleet_queries(engine):
        panel = heatmap.Panel() if title.endswith("heatmap") else timeseries.Panel()
        board = board.with_panel(panel.title(title).with_target(_query(expr)))
    return JSONEncoder(sort_keys=True, indent=2).encode(board.build())


def export_grafana(store: Store, names: Sequence[str] = (), engine: str = "vllm") -> str:
    """The SLO board of the stored SLOs (all, or those named) with alerting on.

    Raises:
        ConfigError: an unknown SLO name or engine, or a metric the engine lacks.
    """
    chosen, stored = stored_slos(store, names)
    return slo_dashboard([s for s in chosen if s.alerting.enabled], engine, stored)
