"""A run's events; why each stage ran, was reused or did not run; its cache key's parts; a
failure's traceback beside its one line.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the events table and three nullable columns (plain ADD COLUMN: see revision 0002)."""
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.String(200),
                  sa.ForeignKey("runs.run_id", ondelete="CASCADE",
                                name="fk_events_run_id_runs"), nullable=False),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("stage", sa.String(200)),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("body", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
    )
    op.create_index("ix_events_run_id_id", "events", ["run_id", "id"])
    op.add_column("stage_runs", sa.Column("reason", sa.Text))
    op.add_column("stage_runs", sa.Column("key_parts", sa.JSON))
    op.add_column("runs", sa.Column("error_traceback", sa.Text))


def downgrade() -> None:
    """Drop them again (SQLite copies the tables here: run it with foreign keys off)."""
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("error_traceback")
    with op.batch_alter_table("stage_runs") as batch:
        batch.drop_column("key_parts")
        batch.drop_column("reason")
    op.drop_index("ix_events_run_id_id", table_name="events")
    op.drop_table("events")
