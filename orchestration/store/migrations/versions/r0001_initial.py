"""The initial schema: pipelines, runs, stage runs, artifacts and lineage, metrics over time.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Frozen copies of the enumerations as they were at this revision (tables.py moves on).
RUN_STATUSES = "'queued', 'running', 'succeeded', 'failed', 'interrupted', 'cancelled'"
STAGE_STATUSES = "'pending', 'running', 'succeeded', 'failed', 'cached', 'skipped'"
TRIGGERS = "'manual', 'schedule', 'backfill', 'resume'"
TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create every table."""
    _pipelines_and_runs()
    _stage_runs()
    _artifacts_and_lineage()
    _metrics()


def downgrade() -> None:
    """Drop every table (children first)."""
    for table in ("eval_metrics", "epochs", "samples", "lineage", "artifacts", "stage_runs",
                  "runs", "pipelines"):
        op.drop_table(table)


def _pipelines_and_runs() -> None:
    op.create_table(
        "pipelines",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("file", sa.String(1000), nullable=False, server_default=""),
        sa.Column("fingerprint", sa.String(128), nullable=False, server_default=""),
        sa.Column("created", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_pipelines"),
        sa.UniqueConstraint("name", "file", "fingerprint",
                            name="uq_pipelines_name_file_fingerprint"),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("pipeline_id", sa.Integer, nullable=False),
        sa.Column("pipeline", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("runner", sa.String(50), nullable=False),
        sa.Column("options", sa.JSON, nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("started", TIME, nullable=False),
        sa.Column("finished", TIME),
        sa.Column("heartbeat", TIME),
        sa.Column("error_stage", sa.String(200)),
        sa.Column("error_seq", sa.BigInteger),
        sa.Column("error_message", sa.Text),
        sa.Column("host", sa.String(255)),
        sa.Column("pid", sa.Integer),
        sa.Column("seqline_version", sa.String(50)),
        sa.PrimaryKeyConstraint("run_id", name="pk_runs"),
        sa.ForeignKeyConstraint(["pipeline_id"], ["pipelines.id"],
                                name="fk_runs_pipeline_id_pipelines"),
        sa.CheckConstraint(f"status IN ({RUN_STATUSES})", name="ck_runs_status"),
        sa.CheckConstraint(f"trigger IN ({TRIGGERS})", name="ck_runs_trigger"),
    )


def _stage_runs() -> None:
    op.create_table(
        "stage_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("stage", sa.String(200), nullable=False),
        sa.Column("component", sa.String(100), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("started", TIME),
        sa.Column("finished", TIME),
        *(sa.Column(name, sa.BigInteger) for name in (
            "records_in", "records_out", "filtered", "exploded", "dead_lettered")),
        sa.Column("seconds", sa.Float),
        sa.Column("waited_input", sa.Float),
        sa.Column("waited_output", sa.Float),
        sa.Column("max_in_flight", sa.Integer),
        sa.Column("cache_key", sa.String(128)),
        sa.Column("cached_from", sa.String(200)),
        sa.Column("params", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_stage_runs"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], ondelete="CASCADE",
                                name="fk_stage_runs_run_id_runs"),
        sa.UniqueConstraint("run_id", "stage", "attempt",
                            name="uq_stage_runs_run_id_stage_attempt"),
        sa.CheckConstraint(f"status IN ({STAGE_STATUSES})", name="ck_stage_runs_status"),
    )
    op.create_index("ix_stage_runs_cache_key", "stage_runs", ["cache_key"])


def _artifacts_and_lineage() -> None:
    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("uri", sa.String(2000), nullable=False),
        sa.Column("kind", sa.String(50), nullable=False),
        sa.Column("records", sa.BigInteger),
        sa.Column("bytes", sa.BigInteger),
        sa.Column("checksum", sa.String(128)),
        sa.PrimaryKeyConstraint("id", name="pk_artifacts"),
        sa.UniqueConstraint("uri", name="uq_artifacts_uri"),
    )
    op.create_table(
        "lineage",
        sa.Column("stage_run_id", sa.Integer, nullable=False),
        sa.Column("artifact_id", sa.Integer, nullable=False),
        sa.Column("role", sa.String(8), nullable=False),
        sa.PrimaryKeyConstraint("stage_run_id", "artifact_id", "role", name="pk_lineage"),
        sa.ForeignKeyConstraint(["stage_run_id"], ["stage_runs.id"], ondelete="CASCADE",
                                name="fk_lineage_stage_run_id_stage_runs"),
        sa.ForeignKeyConstraint(["artifact_id"], ["artifacts.id"], ondelete="CASCADE",
                                name="fk_lineage_artifact_id_artifacts"),
        sa.CheckConstraint("role IN ('input', 'output')", name="ck_lineage_role"),
    )
    op.create_index("ix_lineage_artifact_id", "lineage", ["artifact_id"])


def _metrics() -> None:
    stage_run = (sa.Column("stage_run_id", sa.Integer, nullable=False),)
    op.create_table(
        "samples",
        sa.Column("id", sa.Integer, primary_key=True),
        *stage_run,
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("records_done", sa.BigInteger, nullable=False),
        sa.Column("rows_per_s", sa.Float),
        sa.Column("waited_input", sa.Float),
        sa.Column("waited_output", sa.Float),
        sa.Column("in_flight", sa.Integer),
        sa.Column("reorder_held", sa.Integer),
        sa.PrimaryKeyConstraint("id", name="pk_samples"),
        _stage_run_fk("samples"),
    )
    op.create_index("ix_samples_stage_run_id_t", "samples", ["stage_run_id", "t"])
    op.create_table(
        "epochs",
        sa.Column("stage_run_id", sa.Integer, nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("metrics", sa.JSON, nullable=False),
        sa.Column("input_wait_seconds", sa.Float),
        sa.Column("seconds", sa.Float),
        sa.PrimaryKeyConstraint("stage_run_id", "epoch", name="pk_epochs"),
        _stage_run_fk("epochs"),
    )
    op.create_table(
        "eval_metrics",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("stage_run_id", sa.Integer, nullable=False),
        sa.Column("slice_column", sa.String(200)),
        sa.Column("slice_value", sa.String(500)),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("value", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_eval_metrics"),
        _stage_run_fk("eval_metrics"),
    )
    op.create_index("ix_eval_metrics_stage_run_id", "eval_metrics", ["stage_run_id"])


def _stage_run_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["stage_run_id"], ["stage_runs.id"], ondelete="CASCADE",
                                   name=f"fk_{table}_stage_run_id_stage_runs")
