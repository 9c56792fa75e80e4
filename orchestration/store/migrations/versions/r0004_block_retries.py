"""A stage run's block retries: blocks run again because their worker died.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable column (plain ADD COLUMN: see revision 0002 on SQLite)."""
    op.add_column("stage_runs", sa.Column("block_retries", sa.Integer))


def downgrade() -> None:
    """Drop it again (SQLite copies stage_runs here: run it with foreign keys off)."""
    with op.batch_alter_table("stage_runs") as batch:
        batch.drop_column("block_retries")
