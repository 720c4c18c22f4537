"""The store's tables (SQLAlchemy 2 typed models). Rows never leave the store package.

Times are epoch seconds (float) throughout, the unit samples already use. Optuna keeps its
own tables (``studies``, ``trials``, ...) in the same database; ``tuning_study`` links to them
by ``name`` (the Optuna study has the same name).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite integer primary keys must be INTEGER to autoincrement; PostgreSQL gets BIGINT.
Id = BigInteger().with_variant(Integer(), "sqlite")
Json = JSON()


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Target(Base):
    """An engine endpoint or a GPU node that an agent scrapes."""

    __tablename__ = "target"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(32))
    url: Mapped[str] = mapped_column(String(1000), default="")
    labels: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    node: Mapped[str | None] = mapped_column(String(200))
    pool: Mapped[str | None] = mapped_column(String(200))
    model: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[float] = mapped_column(Float)
    last_seen_at: Mapped[float | None] = mapped_column(Float)


class MetricSeries(Base):
    """One metric name with one label set on one target (Prometheus' notion of a series)."""

    __tablename__ = "metric_series"
    __table_args__ = (
        UniqueConstraint(
            "target_id", "name", "labels_hash", name="uq_metric_series_target_name_labels"
        ),
        Index("ix_metric_series_target_name", "target_id", "name"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("target.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(16))
    labels: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    labels_hash: Mapped[str] = mapped_column(String(32))
    # Samples before this time were rolled up (see retention); None: all raw.
    rollup_until_ts: Mapped[float | None] = mapped_column(Float)


class Sample(Base):
    """A scraped value. The primary key makes re-sent (spooled) samples no-ops.

    ``series_id`` is deliberately not a declared foreign key: SQLite would look the series up
    for every inserted sample (a quarter of the ingest rate); the writer only uses ids it
    read from ``metric_series``.
    """

    __tablename__ = "sample"
    __table_args__ = ({"sqlite_with_rowid": False},)

    series_id: Mapped[int] = mapped_column(Id, primary_key=True)
    ts: Mapped[float] = mapped_column(Float, primary_key=True)
    value: Mapped[float] = mapped_column(Float)


class CounterReset(Base):
    """A drop of a cumulative series: ``prev_value`` is what the counter held before ``ts``.

    Increases over a window are ``last - first + sum(prev_value of resets in between)``, so
    window queries never scan every sample.
    """

    __tablename__ = "counter_reset"
    __table_args__ = ({"sqlite_with_rowid": False},)

    series_id: Mapped[int] = mapped_column(
        ForeignKey("metric_series.id", ondelete="CASCADE"), primary_key=True
    )
    ts: Mapped[float] = mapped_column(Float, primary_key=True)
    prev_value: Mapped[float] = mapped_column(Float)


class SampleRollup(Base):
    """Gauge statistics over one step (e.g. a minute) of samples that were rolled up."""

    __tablename__ = "sample_rollup"
    __table_args__ = ({"sqlite_with_rowid": False},)

    series_id: Mapped[int] = mapped_column(
        ForeignKey("metric_series.id", ondelete="CASCADE"), primary_key=True
    )
    ts: Mapped[float] = mapped_column(Float, primary_key=True)
    step_s: Mapped[float] = mapped_column(Float)
    min: Mapped[float] = mapped_column(Float)
    max: Mapped[float] = mapped_column(Float)
    sum: Mapped[float] = mapped_column(Float)
    count: Mapped[int] = mapped_column(Integer)


class BenchRun(Base):
    """One ``slotune bench`` run (or a simulated one) and its summary JSON."""

    __tablename__ = "bench_run"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    url: Mapped[str] = mapped_column(String(1000))
    model: Mapped[str] = mapped_column(String(200))
    workload: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    started_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    num_requests: Mapped[int] = mapped_column(Integer)
    summary: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)


class BenchRequest(Base):
    """One request of a benchmark run, as the client saw it."""

    __tablename__ = "bench_request"

    run_id: Mapped[int] = mapped_column(
        ForeignKey("bench_run.id", ondelete="CASCADE"), primary_key=True
    )
    request_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer)
    send_s: Mapped[float] = mapped_column(Float)
    scheduled_s: Mapped[float | None] = mapped_column(Float)
    first_token_s: Mapped[float | None] = mapped_column(Float)
    end_s: Mapped[float | None] = mapped_column(Float)
    chunk_times_s: Mapped[list[float]] = mapped_column(Json, default=list)
    chunk_tokens: Mapped[list[int]] = mapped_column(Json, default=list)
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    http_status: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(String(32))
    error_detail: Mapped[str | None] = mapped_column(Text)
    # chunks past the client's bound on timed chunks: {"chunks", "tokens", "gap_counts"}
    untimed: Mapped[dict[str, Any] | None] = mapped_column(Json)


class SLORow(Base):
    """A declared SLO, whole (see ``collector.slo.SLO``): its alert rules only point at it."""

    __tablename__ = "slo"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    sli: Mapped[str] = mapped_column(String(16))
    threshold: Mapped[float] = mapped_column(Float)
    percentile: Mapped[float | None] = mapped_column(Float)
    objective: Mapped[float] = mapped_column(Float)
    window_s: Mapped[float] = mapped_column(Float)
    selector_model: Mapped[str | None] = mapped_column(String(200))
    selector_pool: Mapped[str | None] = mapped_column(String(200))
    selector_target: Mapped[str | None] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    interpolate: Mapped[bool] = mapped_column(Boolean, default=False)
    alerting_enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    # [{"severity", "long_s", "short_s", "factor"}]; empty: the defaults scaled to the window
    alerting_windows: Mapped[list[dict[str, Any]]] = mapped_column(Json, default=list)
    alerting_labels: Mapped[dict[str, str]] = mapped_column(Json, default=dict)
    # The agents' scrape interval the SLO was applied for (None: not given, before 0008):
    # alert windows shorter than it are refused.
    scrape_interval_s: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class AlertRule(Base):
    """An alert: an SLO burn-rate rule or a plain threshold on a metric."""

    __tablename__ = "alert_rule"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    slo_name: Mapped[str | None] = mapped_column(String(128))
    metric: Mapped[str | None] = mapped_column(String(200))
    op: Mapped[str | None] = mapped_column(String(4))
    threshold: Mapped[float | None] = mapped_column(Float)
    for_s: Mapped[float] = mapped_column(Float, default=0.0)
    severity: Mapped[str] = mapped_column(String(16), default="warning")
    labels: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    config: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[float] = mapped_column(Float)


class AlertEvent(Base):
    """A rule changing state (firing / resolved) with the value that made it change."""

    __tablename__ = "alert_event"
    __table_args__ = (Index("ix_alert_event_rule_ts", "rule_id", "ts"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    rule_id: Mapped[int] = mapped_column(ForeignKey("alert_rule.id", ondelete="CASCADE"))
    state: Mapped[str] = mapped_column(String(16))
    ts: Mapped[float] = mapped_column(Float)
    value: Mapped[float | None] = mapped_column(Float)
    labels: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    message: Mapped[str] = mapped_column(Text, default="")


class TuningStudy(Base):
    """What slotune knows about an Optuna study whose trials live in Optuna's tables."""

    __tablename__ = "tuning_study"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    backend: Mapped[str] = mapped_column(String(32))
    engine: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    gpu: Mapped[str] = mapped_column(String(100))
    workload: Mapped[str] = mapped_column(String(200))
    objective: Mapped[str] = mapped_column(String(100))
    slos: Mapped[list[str]] = mapped_column(Json, default=list)
    status: Mapped[str] = mapped_column(String(16))
    result: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class Diagnosis(Base):
    """An analysis result together with the inputs it was computed from."""

    __tablename__ = "diagnosis"
    __table_args__ = (Index("ix_diagnosis_kind_created", "kind", "created_at"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(64))
    subject: Mapped[str] = mapped_column(String(200), default="")
    inputs: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    result: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    created_at: Mapped[float] = mapped_column(Float)


class StudyWorkerRow(Base):
    """The process running a study started from the dashboard (one per study name)."""

    __tablename__ = "study_worker"

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    study_name: Mapped[str] = mapped_column(String(200), unique=True)
    pid: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(16))
    error: Mapped[str] = mapped_column(Text, default="")
    started_at: Mapped[float] = mapped_column(Float)
    heartbeat_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)


class AlertSilence(Base):
    """A rule whose notifications are held back until ``until_ts`` (evaluation goes on)."""

    __tablename__ = "alert_silence"
    __table_args__ = (Index("ix_alert_silence_rule_until", "rule", "until_ts"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    rule: Mapped[str] = mapped_column(String(200))
    until_ts: Mapped[float] = mapped_column(Float)
    comment: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float)


class AlertAck(Base):
    """Someone took a firing event in hand: it is not re-notified."""

    __tablename__ = "alert_ack"

    event_id: Mapped[int] = mapped_column(
        ForeignKey("alert_event.id", ondelete="CASCADE"), primary_key=True
    )
    ts: Mapped[float] = mapped_column(Float)
    comment: Mapped[str] = mapped_column(Text, default="")


class AlertDelivery(Base):
    """An alert event's delivery to one receiver (the outbox): pending while ``delivered_at``
    is NULL. A firing event's ``delivered_at`` moves on with each re-send."""

    __tablename__ = "alert_delivery"
    __table_args__ = (Index("ix_alert_delivery_receiver_delivered", "receiver", "delivered_at"),)

    event_id: Mapped[int] = mapped_column(
        ForeignKey("alert_event.id", ondelete="CASCADE"), primary_key=True
    )
    receiver: Mapped[str] = mapped_column(String(64), primary_key=True)
    delivered_at: Mapped[float | None] = mapped_column(Float)
