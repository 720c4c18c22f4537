"""Initial schema: targets, metric series and samples, benchmark runs, SLOs, alerts, studies,
diagnoses.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "alert_rule",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("slo_name", sa.String(length=128), nullable=True),
        sa.Column("metric", sa.String(length=200), nullable=True),
        sa.Column("op", sa.String(length=4), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("for_s", sa.Float(), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_rule")),
        sa.UniqueConstraint("name", name=op.f("uq_alert_rule_name")),
    )
    op.create_table(
        "bench_run",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("url", sa.String(length=1000), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("workload", sa.String(length=200), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("num_requests", sa.Integer(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_run")),
    )
    with op.batch_alter_table("bench_run", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_bench_run_name"), ["name"], unique=False)

    op.create_table(
        "diagnosis",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_diagnosis")),
    )
    with op.batch_alter_table("diagnosis", schema=None) as batch_op:
        batch_op.create_index("ix_diagnosis_kind_created", ["kind", "created_at"], unique=False)

    op.create_table(
        "slo",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("sli", sa.String(length=16), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("percentile", sa.Float(), nullable=True),
        sa.Column("objective", sa.Float(), nullable=False),
        sa.Column("window_s", sa.Float(), nullable=False),
        sa.Column("selector_model", sa.String(length=200), nullable=True),
        sa.Column("selector_pool", sa.String(length=200), nullable=True),
        sa.Column("selector_target", sa.String(length=200), nullable=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_slo")),
        sa.UniqueConstraint("name", name=op.f("uq_slo_name")),
    )
    op.create_table(
        "target",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("url", sa.String(length=1000), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("node", sa.String(length=200), nullable=True),
        sa.Column("pool", sa.String(length=200), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("last_seen_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_target")),
        sa.UniqueConstraint("name", name=op.f("uq_target_name")),
    )
    op.create_table(
        "tuning_study",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("optuna_study_name", sa.String(length=512), nullable=False),
        sa.Column("backend", sa.String(length=32), nullable=False),
        sa.Column("engine", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("gpu", sa.String(length=100), nullable=False),
        sa.Column("workload", sa.String(length=200), nullable=False),
        sa.Column("objective", sa.String(length=100), nullable=False),
        sa.Column("slos", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tuning_study")),
        sa.UniqueConstraint("name", name=op.f("uq_tuning_study_name")),
    )
    op.create_table(
        "alert_event",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("rule_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["rule_id"],
            ["alert_rule.id"],
            name=op.f("fk_alert_event_rule_id_alert_rule"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_event")),
    )
    with op.batch_alter_table("alert_event", schema=None) as batch_op:
        batch_op.create_index("ix_alert_event_rule_ts", ["rule_id", "ts"], unique=False)

    op.create_table(
        "bench_request",
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("request_id", sa.String(length=200), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("send_s", sa.Float(), nullable=False),
        sa.Column("scheduled_s", sa.Float(), nullable=True),
        sa.Column("first_token_s", sa.Float(), nullable=True),
        sa.Column("end_s", sa.Float(), nullable=True),
        sa.Column("chunk_times_s", sa.JSON(), nullable=False),
        sa.Column("chunk_tokens", sa.JSON(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(length=32), nullable=True),
        sa.Column("error_detail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["bench_run.id"],
            name=op.f("fk_bench_request_run_id_bench_run"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "request_id", name=op.f("pk_bench_request")),
    )
    op.create_table(
        "metric_series",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "target_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("labels_hash", sa.String(length=32), nullable=False),
        sa.Column("rollup_until_ts", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["target_id"],
            ["target.id"],
            name=op.f("fk_metric_series_target_id_target"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_metric_series")),
        sa.UniqueConstraint(
            "target_id", "name", "labels_hash", name="uq_metric_series_target_name_labels"
        ),
    )
    with op.batch_alter_table("metric_series", schema=None) as batch_op:
        batch_op.create_index("ix_metric_series_target_name", ["target_id", "name"], unique=False)

    op.create_table(
        "counter_reset",
        sa.Column(
            "series_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("prev_value", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["metric_series.id"],
            name=op.f("fk_counter_reset_series_id_metric_series"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("series_id", "ts", name=op.f("pk_counter_reset")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "sample",
        sa.Column(
            "series_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("series_id", "ts", name=op.f("pk_sample")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "sample_rollup",
        sa.Column(
            "series_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("step_s", sa.Float(), nullable=False),
        sa.Column("min", sa.Float(), nullable=False),
        sa.Column("max", sa.Float(), nullable=False),
        sa.Column("sum", sa.Float(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["metric_series.id"],
            name=op.f("fk_sample_rollup_series_id_metric_series"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("series_id", "ts", name=op.f("pk_sample_rollup")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("sample_rollup")
    op.drop_table("sample")
    op.drop_table("counter_reset")
    with op.batch_alter_table("metric_series", schema=None) as batch_op:
        batch_op.drop_index("ix_metric_series_target_name")

    op.drop_table("metric_series")
    op.drop_table("bench_request")
    with op.batch_alter_table("alert_event", schema=None) as batch_op:
        batch_op.drop_index("ix_alert_event_rule_ts")

    op.drop_table("alert_event")
    op.drop_table("tuning_study")
    op.drop_table("target")
    op.drop_table("slo")
    with op.batch_alter_table("diagnosis", schema=None) as batch_op:
        batch_op.drop_index("ix_diagnosis_kind_created")

    op.drop_table("diagnosis")
    with op.batch_alter_table("bench_run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_bench_run_name"))

    op.drop_table("bench_run")
    op.drop_table("alert_rule")
