"""The run store: runs, stage runs, artifacts and lineage, metrics over time (SQLAlchemy)."""

from seqline.orchestration.store.engine import alembic_config, current_revision, upgrade
from seqline.orchestration.store.store import DB_FILE, RunIdTaken, RunStore

__all__ = ["DB_FILE", "RunIdTaken", "RunStore", "alembic_config", "current_revision", "upgrade"]
