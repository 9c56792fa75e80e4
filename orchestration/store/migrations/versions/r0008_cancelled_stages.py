"""A stage status `cancelled`: a stage stopped at work, before its commit (by a cancel or
another stage's failure), is no longer stored as `skipped`, which now means it did nothing.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# Frozen copies of the stage statuses before and after this revision (tables.py moves on).
BEFORE = "'pending', 'running', 'succeeded', 'failed', 'cached', 'skipped'"
AFTER = f"{BEFORE}, 'cancelled'"
# The constraint's name in every store: revision 1 named it `ck_stage_runs_status`, and the
# naming convention (tables.metadata, `ck_%(table_name)s_%(constraint_name)s`) prefixed it
# once more. op.f keeps the name as written, so the constraint keeps it.
NAME = "ck_stage_runs_ck_stage_runs_status"


def upgrade() -> None:
    """Allow `cancelled`. No row changes: stages stopped before this revision stay `skipped`
    (their reasons, "not run to the end: …", say they were stopped)."""
    _statuses(AFTER)


def downgrade() -> None:
    """Back to the statuses before it: a cancelled stage is stored as skipped, as it was."""
    op.execute("UPDATE stage_runs SET status = 'skipped' WHERE status = 'cancelled'")
    _statuses(BEFORE)


def _statuses(allowed: str) -> None:
    """Replace the CHECK constraint: PostgreSQL alters it in place; SQLite cannot, so batch
    mode copies the table (engine.upgrade turns SQLite's foreign keys off around the
    migration: with them on, dropping the old table would cascade to every sample, epoch,
    metric and lineage row of its stage runs)."""
    with op.batch_alter_table("stage_runs") as batch:
        batch.drop_constraint(op.f(NAME), type_="check")
        batch.create_check_constraint(op.f(NAME), f"status IN ({allowed})")
