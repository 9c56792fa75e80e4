"""A resumed run's time counts its attempts, not the pause between them: when it was last
resumed, and the seconds its attempts before that ran.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable columns (plain ADD COLUMN: see revision 0002 on SQLite). Runs resumed
    before this revision keep the span from their first start as their seconds."""
    op.add_column("runs", sa.Column("resumed", sa.DateTime(timezone=True)))
    op.add_column("runs", sa.Column("earlier_seconds", sa.Float()))


def downgrade() -> None:
    """Drop them again (SQLite copies the runs table here: run it with foreign keys off)."""
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("earlier_seconds")
        batch.drop_column("resumed")
