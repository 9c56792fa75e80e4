"""The schedules page's data: next fire times (UTC and the schedule's zone), recent ticks."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError, ProgrammingError

from seqline.orchestration.store.rows import iso, now

__all__ = ["schedules_view"]

NEXT = 5  # fire times to show ahead
RECENT = 10  # ticks to show back


def schedules_view(conn: Connection) -> dict[str, Any]:
    """Each schedule with its next fire times and recent ticks (their runs or skip reasons).

    Args:
        conn: a read connection (its engine is what the schedule store's readers take).

    Returns:
        {"available": bool, "why": str | None, "schedules": [...]}; `available` is False
        when this store has no schedule tables yet (a store made before schedules).
    """
    try:  # loaded late: the dashboard works on a store made before schedules existed
        from seqline.orchestration.schedule.ticks import first_after
        from seqline.orchestration.schedule.times import explain, next_fire_times, zone
        from seqline.orchestration.store import schedules as stored
    except ImportError as exc:
        return {"available": False, "why": f"this seqline has no schedules ({exc})",
                "schedules": []}
    engine = conn.engine
    try:
        found = stored.list_schedules(engine)
    except (OperationalError, ProgrammingError):
        return {"available": False, "schedules": [],
                "why": "this run store has no schedule tables yet: `seqline schedule list` "
                       "adds them"}
    out = []
    for s in found:
        last = stored.latest_tick(engine, s.name)
        recent = stored.ticks_of(engine, s.name, limit=RECENT)
        states = stored.run_states(engine, [t.run_id for t in recent if t.run_id])
        after = max(now(), first_after(s, last.fire_time if last else None))
        local = zone(s.tz)
        out.append({
            "name": s.name, "pipeline": s.pipeline, "cron": s.cron, "tz": s.tz,
            "explain": explain(s.cron), "paused": s.paused, "runner": s.runner,
            "overlap": s.overlap, "catchup": s.catchup,
            "next": [{"utc": iso(t), "local": t.astimezone(local).isoformat(timespec="seconds")}
                     for t in next_fire_times(s.cron, s.tz, after, NEXT, s.end)],
            "ticks": stored.tick_rows(recent, states),
        })
    return {"available": True, "why": None, "schedules": out}
