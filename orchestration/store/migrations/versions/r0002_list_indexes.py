"""Indexes for `runs list` filters and the reaper; a stage attempt's error and evaluate's blessing.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the indexes and the two nullable columns (no table copy, so no row is touched)."""
    op.create_index("ix_runs_started", "runs", ["started"])
    op.create_index("ix_runs_pipeline_started", "runs", ["pipeline", "started"])
    op.create_index("ix_runs_status_started", "runs", ["status", "started"])
    # Plain ADD COLUMN on SQLite too: a batch table copy would drop stage_runs, and with
    # foreign keys on, SQLite would cascade that drop to every sample, epoch and metric.
    op.add_column("stage_runs", sa.Column("error", sa.Text))
    op.add_column("stage_runs", sa.Column("blessed", sa.Boolean))


def downgrade() -> None:
    """Drop them again (SQLite copies stage_runs here: run it with foreign keys off)."""
    with op.batch_alter_table("stage_runs") as batch:
        batch.drop_column("blessed")
        batch.drop_column("error")
    for name in ("ix_runs_status_started", "ix_runs_pipeline_started", "ix_runs_started"):
        op.drop_index(name, table_name="runs")
