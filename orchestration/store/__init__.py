"""The run store by concern: reads (RunReader), writes (RunWriter), schedules (ScheduleStore),
opened together as RunStore; statuses, errors and the liveness rule each in one module."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Where each name is defined, imported on first use (PEP 562): the CLI reads `statuses` and
# `errors` to build its commands, and must not load SQLAlchemy for `seqline --help`.
_HOMES = {
    **dict.fromkeys(["alembic_config", "current_revision", "upgrade"], "engine"),
    **dict.fromkeys(["Conflict", "LeaseHeld", "RunIdTaken", "RunNotFound", "ScheduleExists",
                     "ScheduleNotFound"], "errors"),
    "RunReader": "reads", "RunWriter": "writes",
    **dict.fromkeys(["Schedule", "ScheduleStore", "Tick"], "schedules"),
    **dict.fromkeys(["DB_FILE", "RunStore", "sqlite_url"], "store"),
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
