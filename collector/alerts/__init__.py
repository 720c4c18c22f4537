"""SLO alerts: SLIs from the store, error budgets, burn rates, threshold rules, evaluation.

Public surface (the dashboard's /slos and /alerts pages, the CLI and tests call these):

- :func:`slo_status` ``(store, slo, at_ts) -> SloStatus``: attainment and budget left over
  the SLO window, error ratio and burn rate per window, each burn-rate condition and the
  severities firing (``status.firing``), and a note when the threshold is not a bucket bound.
- :func:`evaluate_all` ``(store, at_ts) -> list[RuleStatus]``: every stored alert rule (SLO
  burn-rate rules and threshold rules, one status per rule and target) at a time, with
  state ``ok`` / ``pending`` / ``firing``, value and burn rates; stateless except for
  hysteresis, which reads the rule's last stored event.
- :func:`burn_windows`, :func:`error_budget`, :func:`burn_rate`: the policy maths.
- :class:`SliReader`, :func:`bench_counts`: good / total counts from engine histograms and
  availability counters, or from benchmark records.

Modules: ``policy`` (budget, burn rate, MWMB windows), ``sli`` (counts), ``status`` (one
SLO at a time).
"""

from slotune.collector.alerts.policy import (
    SRE_WORKBOOK,
    burn_rate,
    burn_windows,
    error_budget,
)
from slotune.collector.alerts.sli import BoundaryNote, Counts, SliCounts, SliReader, bench_counts
from slotune.collector.alerts.status import ConditionStatus, SloStatus, WindowBurn, slo_status

__all__ = [
    "SRE_WORKBOOK",
    "BoundaryNote",
    "ConditionStatus",
    "Counts",
    "SliCounts",
    "SliReader",
    "SloStatus",
    "WindowBurn",
    "bench_counts",
    "burn_rate",
    "burn_windows",
    "error_budget",
    "slo_status",
]
