"""Schedules, their ticks (unique per schedule, fire time and trigger) and the scheduler lease.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# Frozen copies of the enumerations as they were at this revision (tables.py moves on).
OVERLAP = "'skip', 'queue', 'allow'"
CATCHUP = "'none', 'latest', 'all'"
TICK_STATUSES = "'launching', 'launched', 'queued', 'skipped', 'failed'"
TICK_TRIGGERS = "'schedule', 'backfill'"
TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the three tables (new tables only: no existing row is touched)."""
    _schedules()
    _ticks()
    op.create_table(
        "scheduler_lease",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("acquired", TIME, nullable=False),
        sa.Column("expires", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_scheduler_lease"),
        sa.CheckConstraint("id = 1", name="ck_scheduler_lease_one_row"),
    )


def downgrade() -> None:
    """Drop them (ticks first: they point at schedules)."""
    for table in ("scheduler_lease", "ticks", "schedules"):
        op.drop_table(table)


def _schedules() -> None:
    op.create_table(
        "schedules",
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("pipeline", sa.String(1000), nullable=False),
        sa.Column("cron", sa.String(200), nullable=False),
        sa.Column("tz", sa.String(64), nullable=False),
        sa.Column("runner", sa.String(50), nullable=False),
        sa.Column("workers", sa.Integer, nullable=False),
        sa.Column("overlap", sa.String(8), nullable=False),
        sa.Column("catchup", sa.String(8), nullable=False),
        sa.Column("max_catchup", sa.Integer, nullable=False),
        sa.Column("start", TIME),
        sa.Column("end", TIME),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("since", TIME, nullable=False),
        sa.Column("created", TIME, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_schedules"),
        sa.CheckConstraint(f"overlap IN ({OVERLAP})", name="ck_schedules_overlap"),
        sa.CheckConstraint(f"catchup IN ({CATCHUP})", name="ck_schedules_catchup"),
    )


def _ticks() -> None:
    op.create_table(
        "ticks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("schedule", sa.String(100), nullable=False),
        sa.Column("fire_time", TIME, nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(200)),
        sa.Column("reason", sa.Text),
        sa.Column("recorded", TIME, nullable=False),
        sa.Column("launched", TIME),
        sa.Column("host", sa.String(255)),
        sa.Column("pid", sa.Integer),
        sa.PrimaryKeyConstraint("id", name="pk_ticks"),
        sa.ForeignKeyConstraint(["schedule"], ["schedules.name"], ondelete="CASCADE",
                                name="fk_ticks_schedule_schedules"),
        sa.UniqueConstraint("schedule", "fire_time", "trigger",
                            name="uq_ticks_schedule_fire_time_trigger"),
        sa.CheckConstraint(f"status IN ({TICK_STATUSES})", name="ck_ticks_status"),
        sa.CheckConstraint(f"trigger IN ({TICK_TRIGGERS})", name="ck_ticks_trigger"),
    )
    op.create_index("ix_ticks_status", "ticks", ["status"])
