"""The run store by concern: reads (RunReader), writes (RunWriter), schedules (ScheduleStore),
opened together as RunStore; statuses, errors and the liveness rule each in one module."""

from seqline.orchestration.store.engine import alembic_config, current_revision, upgrade
from seqline.orchestration.store.errors import (
    Conflict,
    LeaseHeld,
    RunIdTaken,
    RunNotFound,
    ScheduleExists,
    ScheduleNotFound,
)
from seqline.orchestration.store.reads import RunReader
from seqline.orchestration.store.schedules import Schedule, ScheduleStore, Tick
from seqline.orchestration.store.store import DB_FILE, RunStore, sqlite_url
from seqline.orchestration.store.writes import RunWriter

__all__ = ["DB_FILE", "Conflict", "LeaseHeld", "RunIdTaken", "RunNotFound", "RunReader",
           "RunStore", "RunWriter", "Schedule", "ScheduleExists", "ScheduleNotFound",
           "ScheduleStore", "Tick", "alembic_config", "current_revision", "sqlite_url",
           "upgrade"]
