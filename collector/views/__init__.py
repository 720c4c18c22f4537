"""Read models for the dashboard: the fleet, SLO status, the overview, benchmark runs.

Each function takes the open store and returns frozen records; the dashboard's pages and
the tests call the same functions. Fleet and SLO figures come from batched store reads
(:func:`slotune.collector.store.series_at`), so a page over a hundred targets and thirty
days costs a few statements.
"""

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
from slotune.collector.views.overview import Overview, firing_alerts, overview
from slotune.collector.views.slo_status import SLOState, SLOStatus, slo_statuses

__all__ = [
    "FleetRow",
    "FleetTable",
    "LatencySamples",
    "Overview",
    "RateCurve",
    "RatePointView",
    "SLOState",
    "SLOStatus",
    "firing_alerts",
    "fleet_table",
    "fleet_timeseries_by_target",
    "latencies_of",
    "max_rate_curves",
    "outlier",
    "overview",
    "slo_statuses",
]
