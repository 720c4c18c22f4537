"""Read models for the dashboard: the fleet, SLO status, the overview, benchmark runs.

Each function takes the open store and returns frozen records; the dashboard's pages and
the tests call the same functions. Fleet and SLO figures come from batched store reads
(:func:`slotune.collector.store.series_at`), so a page over a hundred targets and thirty
days costs a few statements.
"""

from slotune.collector.views.alerts import ackable, by_severity, severity_rank
from slotune.collector.views.bench import (
    LatencySamples,
    RateCurve,
    RatePointView,
    latencies_of,
    max_rate_curves,
)
from slotune.collector.views.fleet import (
    FleetRow,
    FleetTable,
    fleet_table,
    fleet_timeseries_by_target,
    outlier,
)
from slotune.collector.views.fleet_plans import (
    FLEET_AUTOSCALE,
    FLEET_PLAN,
    FLEET_SIM,
    PolicyResult,
    StoredAutoscale,
    autoscale_plan,
    capacity_plan,
    fleet_results,
    sim_policies,
)
from slotune.collector.views.forms import FORM_SOURCE, slo_from_fields
from slotune.collector.views.overview import Overview, firing_alerts, overview
from slotune.collector.views.slo_history import SLOHistory, slo_history
from slotune.collector.views.slo_status import (
    SLOState,
    SLOStatus,
    slo_figures,
    slo_statuses,
    window_label,
)

__all__ = [
    "FLEET_AUTOSCALE",
    "FLEET_PLAN",
    "FLEET_SIM",
    "FORM_SOURCE",
    "FleetRow",
    "FleetTable",
    "LatencySamples",
    "Overview",
    "PolicyResult",
    "RateCurve",
    "RatePointView",
    "SLOHistory",
    "SLOState",
    "SLOStatus",
    "StoredAutoscale",
    "ackable",
    "autoscale_plan",
    "by_severity",
    "capacity_plan",
    "firing_alerts",
    "fleet_results",
    "fleet_table",
    "fleet_timeseries_by_target",
    "latencies_of",
    "max_rate_curves",
    "outlier",
    "overview",
    "severity_rank",
    "sim_policies",
    "slo_figures",
    "slo_from_fields",
    "slo_history",
    "slo_statuses",
    "window_label",
]
