"""Schedules and their ticks as the documents of `schedule list --json` / `schedule show --json`
(the dashboard's schedules page shows the same ticks)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from seqline.orchestration.schedule.times import explain, next_fire_times
from seqline.orchestration.store import Schedule, ScheduleStore, Tick
from seqline.orchestration.store.rows import iso
from seqline.orchestration.store.statuses import TickStatus

__all__ = ["schedule_detail", "schedule_summary", "tick_rows"]


def _next(schedule: Schedule, at: datetime, count: int) -> list[datetime]:
    """The next fire times, counted from the later of `at` and the schedule's start."""
    after = at if schedule.start is None else max(at, schedule.start - timedelta(seconds=1))
    return next_fire_times(schedule.cron, schedule.tz, after, count, schedule.end)


def schedule_summary(schedule: Schedule, at: datetime) -> dict[str, Any]:
    """One `schedule list` entry.

    Args:
        schedule: the schedule.
        at: the time now.

    Returns:
        name, pipeline, cron, tz, paused, next_fire (ISO UTC, null when none is left),
        overlap, catchup, runner.
    """
    upcoming = _next(schedule, at, 1)
    return {"name": schedule.name, "pipeline": schedule.pipeline, "cron": schedule.cron,
            "tz": schedule.tz, "paused": schedule.paused,
            "next_fire": iso(upcoming[0]) if upcoming else None,
            "overlap": schedule.overlap, "catchup": schedule.catchup,
            "runner": schedule.runner}


def schedule_detail(stored: ScheduleStore, schedule: Schedule, at: datetime, count: int,
                    limit: int | None) -> dict[str, Any]:
    """The `schedule show` object.

    Args:
        stored: the store's schedules (for the ticks and their runs' states).
        schedule: the schedule.
        at: the time now.
        count: how many next fire times.
        limit: at most this many ticks, newest first (None: all).

    Returns:
        The summary's fields, plus explanation, workers, max_catchup, start, end, created,
        next (the next `count` fire times) and ticks (fire_time, status, run_id, reason,
        trigger, run_status, launched).
    """
    found = stored.ticks_of(schedule.name, limit=limit)
    states = stored.run_states([t.run_id for t in found if t.run_id])
    return {**schedule_summary(schedule, at), "explanation": explain(schedule.cron),
            "workers": schedule.workers, "max_catchup": schedule.max_catchup,
            "start": iso(schedule.start), "end": iso(schedule.end),
            "created": iso(schedule.created),
            "next": [iso(t) for t in _next(schedule, at, count)],
            "ticks": tick_rows(found, states)}


def tick_rows(found: list[Tick], states: dict[str, str]) -> list[dict[str, Any]]:
    """Ticks as `schedule show --json` prints them (a tick's run id only once launching).

    Args:
        found: ticks, in the order to print.
        states: {run_id: status} (ScheduleStore.run_states).

    Returns:
        Dicts of fire_time, status, run_id, reason, trigger, run_status, launched.
    """
    return [{"fire_time": iso(t.fire_time), "status": t.status, "run_id": t.run_id
             if t.status in (TickStatus.launching, TickStatus.launched) else None,
             "reason": t.reason, "trigger": t.trigger,
             "run_status": states.get(t.run_id or ""), "launched": iso(t.launched)}
            for t in found]
