"""Schedules as the JSON of `schedule list --json` / `schedule show --json`, and as tables
fitted to a terminal."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text
from sqlalchemy import Engine

from seqline.orchestration.console import Column, format_time, print_table
from seqline.orchestration.schedule.times import explain, next_fire_times
from seqline.orchestration.store import schedules as db
from seqline.orchestration.store.rows import iso
from seqline.orchestration.store.schedules import Schedule

__all__ = ["print_detail", "print_schedules", "schedule_detail", "schedule_summary"]


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


# The name and whether it is paused are always shown; the rest by priority (console.Column).
SCHEDULE_COLUMNS = [Column("name"), Column("paused"), Column("next fire (UTC)", 1),
                    Column("cron", 1), Column("tz", 2), Column("runner", 4),
                    Column("overlap", 5), Column("catch-up", 5), Column("pipeline", 3)]
# A tick's run id holds its fire time; the run and both statuses are always shown.
TICK_COLUMNS = [Column("fire time (UTC)", 1), Column("trigger", 2), Column("status"),
                Column("run"), Column("run status"), Column("reason", 3)]


def print_schedules(out: Console, rows: list[dict[str, Any]], wide: bool = False) -> None:
    """`schedule list` for a terminal (or a pipe: every column)."""
    print_table(out, SCHEDULE_COLUMNS, [
        [r["name"], "yes" if r["paused"] else "", format_time(r["next_fire"]) or "-", r["cron"],
         r["tz"], r["runner"], r["overlap"], r["catchup"], r["pipeline"]] for r in rows],
        wide=wide)


def print_detail(out: Console, detail: dict[str, Any], wide: bool = False) -> None:
    """`schedule show` for a terminal: the schedule, its next fire times, its ticks."""
    grid = Table.grid(padding=(0, 2))
    for key in ("name", "pipeline", "cron", "explanation", "tz", "paused", "runner",
                "workers", "overlap", "catchup", "max_catchup", "start", "end", "created"):
        grid.add_row(key, Text("" if detail[key] is None else str(detail[key])))
    out.print(grid)
    print_table(out, [Column("next fire times (UTC)")],
                [[format_time(fire)] for fire in detail["next"]], wide=wide)
    print_table(out, TICK_COLUMNS, [
        [format_time(t["fire_time"]), t["trigger"], t["status"], t["run_id"], t["run_status"],
         t["reason"]] for t in detail["ticks"]], wide=wide, title="ticks, newest first")
