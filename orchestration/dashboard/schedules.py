"""The schedules page's data: next fire times (UTC and the schedule's zone), recent ticks."""

from __future__ import annotations

from typing import Any

from seqline.orchestration.schedule.listing import tick_rows
from seqline.orchestration.schedule.ticks import first_after
from seqline.orchestration.schedule.times import explain, next_fire_times, zone
from seqline.orchestration.store import ScheduleStore
from seqline.orchestration.store.rows import iso, now

__all__ = ["schedules_view"]

NEXT = 5  # fire times to show ahead
RECENT = 10  # ticks to show back


def schedules_view(stored: ScheduleStore) -> dict[str, Any]:
    """Each schedule with its next fire times and recent ticks (their runs or skip reasons).

    Args:
        stored: the store's schedules (read only).

    Returns:
        {"available": True, "why": None, "schedules": [...]}: the page's context (the store
        is migrated before the dashboard serves, so its schedule tables are always there).
    """
    out = []
    for s in stored.list_schedules():
        last = stored.latest_tick(s.name)
        recent = stored.ticks_of(s.name, limit=RECENT)
        states = stored.run_states([t.run_id for t in recent if t.run_id])
        after = max(now(), first_after(s, last.fire_time if last else None))
        local = zone(s.tz)
        out.append({
            "name": s.name, "pipeline": s.pipeline, "cron": s.cron, "tz": s.tz,
            "explain": explain(s.cron), "paused": s.paused, "runner": s.runner,
            "overlap": s.overlap, "catchup": s.catchup,
            "next": [{"utc": iso(t), "local": t.astimezone(local).isoformat(timespec="seconds")}
                     for t in next_fire_times(s.cron, s.tz, after, NEXT, s.end)],
            "ticks": tick_rows(recent, states),
        })
    return {"available": True, "why": None, "schedules": out}
