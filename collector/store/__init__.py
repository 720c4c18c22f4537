"""The store: one database (SQLite file or PostgreSQL) for samples, runs, SLOs and studies.

Open it with :func:`open_store`; every function takes the :class:`Store` and exchanges
frozen records (ORM rows never leave this package). The schema is managed by Alembic
(:func:`upgrade`, ``slotune db upgrade``); :func:`open_store` refuses a schema older or newer
than this slotune knows. See docs/store.md.
"""

from slotune.collector.series import MetricType  # the one definition, shared with the agent
from slotune.collector.store._alerts import (
    AlertHistoryEntry,
    GaugeStats,
    PendingDelivery,
    SeriesRef,
    SilenceInfo,
    ack_event,
    active_silences,
    alert_history,
    delete_alert_rules,
    delivery_times,
    find_series,
    gauge_stats,
    increases,
    last_alert_events,
    mark_delivered,
    pending_deliveries,
    silence_rule,
    values_at,
)
from slotune.collector.store._bench import list_bench_runs, load_bench_run, save_bench_run
from slotune.collector.store._findings import (
    list_alert_events,
    list_alert_rules,
    list_diagnoses,
    record_alert_event,
    save_alert_rule,
    save_diagnosis,
)
from slotune.collector.store._fleet import SeriesPoints, series_at
from slotune.collector.store._queries import (
    bucket_quantile,
    counter_increase,
    counter_rate,
    gauge_avg,
    histogram_quantile,
    latest_value,
)
from slotune.collector.store._records import (
    AlertEventInfo,
    AlertRuleInfo,
    AlertState,
    BenchRunData,
    BenchRunInfo,
    BenchRunMeta,
    DiagnosisInfo,
    RetentionCounts,
    SampleIn,
    StudyInfo,
    StudyStatus,
    TargetInfo,
)
from slotune.collector.store._retention import prune, rollup, vacuum
from slotune.collector.store._samples import write_samples
from slotune.collector.store._slos import delete_slo, list_slos, save_slos, slo_scrape_intervals
from slotune.collector.store._store import (
    RevisionInfo,
    Store,
    current_revision,
    downgrade,
    open_store,
    schema_status,
    upgrade,
)
from slotune.collector.store._studies import get_study, list_studies, save_study
from slotune.collector.store._targets import list_targets, register_target
from slotune.collector.store._url import default_db_url, redact_url
from slotune.collector.store._workers import (
    WorkerInfo,
    WorkerState,
    get_worker,
    list_workers,
    save_worker,
    touch_worker,
)

__all__ = [
    "AlertEventInfo",
    "AlertHistoryEntry",
    "AlertRuleInfo",
    "AlertState",
    "BenchRunData",
    "BenchRunInfo",
    "BenchRunMeta",
    "DiagnosisInfo",
    "GaugeStats",
    "MetricType",
    "PendingDelivery",
    "RetentionCounts",
    "RevisionInfo",
    "SampleIn",
    "SeriesPoints",
    "SeriesRef",
    "SilenceInfo",
    "Store",
    "StudyInfo",
    "StudyStatus",
    "TargetInfo",
    "WorkerInfo",
    "WorkerState",
    "ack_event",
    "active_silences",
    "alert_history",
    "bucket_quantile",
    "counter_increase",
    "counter_rate",
    "current_revision",
    "default_db_url",
    "delete_alert_rules",
    "delete_slo",
    "delivery_times",
    "downgrade",
    "find_series",
    "gauge_avg",
    "gauge_stats",
    "get_study",
    "get_worker",
    "histogram_quantile",
    "increases",
    "last_alert_events",
    "latest_value",
    "list_alert_events",
    "list_alert_rules",
    "list_bench_runs",
    "list_diagnoses",
    "list_slos",
    "list_studies",
    "list_targets",
    "list_workers",
    "load_bench_run",
    "mark_delivered",
    "open_store",
    "pending_deliveries",
    "prune",
    "record_alert_event",
    "redact_url",
    "register_target",
    "rollup",
    "save_alert_rule",
    "save_bench_run",
    "save_diagnosis",
    "save_slos",
    "save_study",
    "save_worker",
    "schema_status",
    "series_at",
    "silence_rule",
    "slo_scrape_intervals",
    "touch_worker",
    "upgrade",
    "vacuum",
    "values_at",
    "write_samples",
]
