"""An index on ticks.run_id: a run's page names the tick that launched it (its rerun line), and
without one each look scanned every tick, one per scheduled run.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the index (no row is touched)."""
    op.create_index("ix_ticks_run_id", "ticks", ["run_id"])


def downgrade() -> None:
    """Drop it again."""
    op.drop_index("ix_ticks_run_id", table_name="ticks")
