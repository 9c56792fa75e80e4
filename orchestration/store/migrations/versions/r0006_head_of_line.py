"""Head of line in the samples: a stage's reorder buffer as sampled (watermark, the highest seq
finished, the results held in records and bytes, and the block they wait for).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# name -> type, in the table's order (a frozen copy: tables.py may change later)
COLUMNS: dict[str, sa.types.TypeEngine[Any]] = {
    "watermark": sa.BigInteger(), "seq_done": sa.BigInteger(), "held_records": sa.BigInteger(),
    "held_bytes": sa.BigInteger(), "blocker_block": sa.Integer(), "blocker_seq": sa.BigInteger(),
    "blocker_attempt": sa.Integer(), "blocker_worker": sa.String(64),
    "blocker_seconds": sa.Float(),
}


def upgrade() -> None:
    """Add the nullable columns (plain ADD COLUMN: see revision 0002 on SQLite); samples of
    earlier runs have none (their pages say so)."""
    for name, kind in COLUMNS.items():
        op.add_column("samples", sa.Column(name, kind))


def downgrade() -> None:
    """Drop them again (SQLite copies the samples table here: run it with foreign keys off)."""
    with op.batch_alter_table("samples") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
