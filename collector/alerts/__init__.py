"""SLO alerts: SLIs from the store, error budgets, burn rates, threshold rules, evaluation.

Public surface (the dashboard's /slos and /alerts pages, the CLI and tests call these):

- :func:`slo_status` ``(store, slo, at_ts) -> SloStatus``: attainment and budget left over
  the SLO window, error ratio and burn rate per window, each burn-rate condition and the
  severities firing (``status.firing``), and a note when the threshold is not a bucket bound.
- :func:`load_slos` ``(store) -> dict[str, SLO]``: the stored SLOs by name, each whole with
  its ``interpolate`` and ``alerting`` settings (what ``slo_status`` should be given).
- :func:`evaluate_all` ``(store, at_ts) -> list[RuleStatus]``: every enabled alert rule (SLO
  burn-rate rules ``SLO:severity`` and threshold rules, one status per rule and target) at a
  time: state ``ok`` / ``pending`` / ``firing`` / ``no_data`` / ``error``, value, burn rates,
  silence; stateless except for hysteresis, which reads the instance's newest stored event.
- :func:`burn_windows`, :func:`error_budget`, :func:`burn_rate`: the policy maths.
- :class:`SliReader`, :func:`bench_counts`: good / total counts from engine histograms and
  availability counters, or from benchmark records.
- :func:`sli_reader` ``(store, at_ts, metrics) -> SliSource``: the same counts from the store
  or, given a query API client (``--metrics URL``), as PromQL (:class:`PromSliReader`).

Modules, one job each: ``policy`` (budget, burn rate, MWMB windows), ``sli`` (counts),
``status`` (one SLO at a time), ``metrics`` / ``rules`` / ``thresholds`` (threshold rules),
``slo_rules`` (an SLO's stored alert rules), ``evaluator`` (all rules, events, the loop),
``notify`` (Alertmanager, Slack, log), ``dispatch`` (what each receiver is sent when, from
the store's delivery outbox), ``promrules`` (Prometheus rule export), ``grafana`` (Grafana dashboards), ``openslo``
(OpenSLO v1 import), ``history`` (OpenMetrics history import).
"""

from slotune.collector.alerts.dispatch import Dispatcher, DispatchReport
from slotune.collector.alerts.evaluator import (
    RuleState,
    RuleStatus,
    evaluate_all,
    open_when_reachable,
    run_loop,
)
from slotune.collector.alerts.grafana import export_grafana, fleet_dashboard
from slotune.collector.alerts.history import import_openmetrics
from slotune.collector.alerts.notify import make_notifier, test_alerts
from slotune.collector.alerts.policy import SRE_WORKBOOK, burn_rate, burn_windows, error_budget
from slotune.collector.alerts.promrules import export_prometheus
from slotune.collector.alerts.rules import (
    SHORTHAND_FORM,
    ThresholdRule,
    delete_threshold_rule,
    load_rules_file,
    parse_rule,
)
from slotune.collector.alerts.sli import BoundaryNote, Counts, SliCounts, SliReader, bench_counts
from slotune.collector.alerts.sli_prom import PromSliReader
from slotune.collector.alerts.sli_source import SliSource, sli_reader
from slotune.collector.alerts.slo_files import load_slo_documents
from slotune.collector.alerts.slo_rules import apply_slos, delete_slo_and_rules, load_slos
from slotune.collector.alerts.status import ConditionStatus, SloStatus, WindowBurn, slo_status

__all__ = [
    "SHORTHAND_FORM",
    "SRE_WORKBOOK",
    "BoundaryNote",
    "ConditionStatus",
    "Counts",
    "DispatchReport",
    "Dispatcher",
    "PromSliReader",
    "RuleState",
    "RuleStatus",
    "SliCounts",
    "SliReader",
    "SliSource",
    "SloStatus",
    "ThresholdRule",
    "WindowBurn",
    "apply_slos",
    "bench_counts",
    "burn_rate",
    "burn_windows",
    "delete_slo_and_rules",
    "delete_threshold_rule",
    "error_budget",
    "evaluate_all",
    "export_grafana",
    "export_prometheus",
    "fleet_dashboard",
    "import_openmetrics",
    "load_rules_file",
    "load_slo_documents",
    "load_slos",
    "make_notifier",
    "open_when_reachable",
    "parse_rule",
    "run_loop",
    "sli_reader",
    "slo_status",
    "test_alerts",
]
