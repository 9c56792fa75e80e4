"""Schedules as the JSON of `schedule list --json` / `schedule show --json`, and as tables."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from rich.table import Table
from sqlalchemy import Engine

from seqline.orchestration.options import unwrapped_table
from seqline.orchestration.schedule.times import explain, next_fire_times
from seqline.orchestration.store import schedules as db
from seqline.orchestration.store.rows import iso
from seqline.orchestration.store.schedules import Schedule

__all__ = ["schedule_detail", "schedule_summary", "schedules_table", "detail_tables"]


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


def schedule_detail(engine: Engine, schedule: Schedule, at: datetime, count: int,
                    limit: int | None) -> dict[str, Any]:
    """The `schedule show` object.

    Args:
        engine: the store's engine (for the ticks and their runs' states).
        schedule: the schedule.
        at: the time now.
        count: how many next fire times.
        limit: at most this many ticks, newest first (None: all).

    Returns:
        The summary's fields, plus explanation, workers, max_catchup, start, end, created,
        next (the next `count` fire times) and ticks (fire_time, status, run_id, reason,
        trigger, run_status, launched).
    """
    found = db.ticks_of(engine, schedule.name, limit=limit)
    states = db.run_states(engine, [t.run_id for t in found if t.run_id])
    return {**schedule_summary(schedule, at), "explanation": explain(schedule.cron),
            "workers": schedule.workers, "max_catchup": schedule.max_catchup,
            "start": iso(schedule.start), "end": iso(schedule.end),
            "created": iso(schedule.created),
            "next": [iso(t) for t in _next(schedule, at, count)],
            "ticks": db.tick_rows(found, states)}


def schedules_table(rows: list[dict[str, Any]]) -> Table:
    """`schedule list` for a terminal."""
    table = unwrapped_table("name", "cron", "tz", "next fire (UTC)", "paused", "overlap",
                            "catch-up", "pipeline")
    for r in rows:
        table.add_row(r["name"], r["cron"], r["tz"], r["next_fire"] or "-",
                      "yes" if r["paused"] else "", r["overlap"], r["catchup"], r["pipeline"])
    return table


def detail_tables(detail: dict[str, Any]) -> list[Table]:
    """`schedule show` for a terminal: the schedule, its next fire times, its ticks."""
    grid = Table.grid(padding=(0, 2))
    for key in ("name", "pipeline", "cron", "explanation", "tz", "paused", "runner",
                "workers", "overlap", "catchup", "max_catchup", "start", "end", "created"):
        grid.add_row(key, "" if detail[key] is None else str(detail[key]))
    upcoming = unwrapped_table("next fire times (UTC)")
    for fire in detail["next"]:
        upcoming.add_row(fire)
    ticks = unwrapped_table("fire time (UTC)", "trigger", "status", "run", "run status", "reason",
                   title="ticks, newest first")
    for t in detail["ticks"]:
        ticks.add_row(t["fire_time"], t["trigger"], t["status"], t["run_id"] or "",
                      t["run_status"] or "", t["reason"] or "")
    return [grid, upcoming, ticks]
