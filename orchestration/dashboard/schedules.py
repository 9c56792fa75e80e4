"""The schedules page's data: each schedule as `schedule show --json` has it, next fire times
and recent ticks; the page says the fire times in the schedule's zone too (`in_zone`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from seqline.orchestration.schedule.listing import schedule_detail
from seqline.orchestration.schedule.times import zone
from seqline.orchestration.store import ScheduleStore
from seqline.orchestration.store.rows import now

__all__ = ["in_zone", "schedules_view"]

NEXT = 5  # fire times to show ahead
RECENT = 10  # ticks to show back


def schedules_view(stored: ScheduleStore) -> dict[str, Any]:
    """Each schedule with its next fire times and recent ticks (their runs or skip reasons).

    Args:
        stored: the store's schedules (read only).

    Returns:
        {"available": True, "why": None, "schedules": [...]}: the page's context (the store
        is migrated before the dashboard serves, so its schedule tables are always there).
        Each schedule is `seqline schedule show NAME --json`'s object (listing.schedule_detail:
        "explanation", "next" as UTC ISO times, …) with NEXT fire times and RECENT ticks, so
        that /api/schedules and the CLI name and shape their fields alike.
    """
    at = now()
    return {"available": True, "why": None,
            "schedules": [schedule_detail(stored, s, at, NEXT, RECENT)
                          for s in stored.list_schedules()]}


def in_zone(utc: str, tz: str) -> str:
    """A UTC ISO time (a schedule's next fire time) in the IANA zone `tz`, ISO to the second.

    Example: "2026-12-01T07:30:00+00:00", "America/New_York" -> "2026-12-01T02:30:00-05:00".
    """
    return datetime.fromisoformat(utc).astimezone(zone(tz)).isoformat(timespec="seconds")
