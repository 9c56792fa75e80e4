"""Schedules, their ticks and the scheduler lease in the run store: every statement in one place."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from seqline.orchestration.store.engine import writing
from seqline.orchestration.store.rows import insert_ignoring, iso, now
from seqline.orchestration.store.tables import runs, scheduler_lease, schedules, ticks
from seqline.pipeline.errors import ConfigError

__all__ = ["LeaseHeld", "Schedule", "ScheduleExists", "Tick", "acquire_lease",
           "add_schedule", "delete_schedule", "get_schedule", "latest_tick", "list_schedules",
           "record_ticks", "release_lease", "renew_lease", "run_states", "set_paused",
           "tick_rows", "ticks_of", "ticks_with_status", "update_tick"]



class ScheduleExists(ConfigError):
    """A schedule with this name is already in the store (CLI exit 2)."""


class LeaseHeld(ConfigError):
    """Another scheduler holds this store's lease (CLI exit 2)."""

    def __init__(self, message: str, host: str, pid: int) -> None:
        super().__init__(message)
        self.host = host
        self.pid = pid


@dataclass(frozen=True)
class Schedule:
    """One row of `schedules`: a pipeline, when it fires, and its policies."""

    name: str
    pipeline: str
    cron: str
    tz: str
    runner: str
    workers: int
    overlap: str
    catchup: str
    max_catchup: int
    start: datetime | None
    end: datetime | None
    paused: bool
    since: datetime
    created: datetime


@dataclass(frozen=True)
class Tick:
    """One row of `ticks`: a fire time of a schedule and what became of it."""

    id: int
    schedule: str
    fire_time: datetime
    trigger: str
    status: str
    run_id: str | None
    reason: str | None
    recorded: datetime
    launched: datetime | None
    host: str | None
    pid: int | None


# -- schedules --------------------------------------------------------------------------------

def add_schedule(engine: Engine, schedule: Schedule) -> None:
    """Record a new schedule.

    Args:
        engine: the store's engine.
        schedule: the schedule, already validated.

    Raises:
        ScheduleExists: the name is taken (the primary key refuses it: no check first).
    """
    try:
        with writing(engine) as conn:
            conn.execute(insert(schedules).values(**vars(schedule)))
    except IntegrityError as exc:
        raise ScheduleExists(f"a schedule named {schedule.name!r} already exists: choose "
                             "another name, or `seqline schedule remove` it first.") from exc


def list_schedules(engine: Engine) -> list[Schedule]:
    """Every schedule, by name."""
    with engine.connect() as conn:
        return [Schedule(**r._mapping) for r in
                conn.execute(select(schedules).order_by(schedules.c.name))]


def get_schedule(engine: Engine, name: str) -> Schedule:
    """The schedule called `name`.

    Args:
        engine: the store's engine.
        name: its name.

    Returns:
        The schedule.

    Raises:
        ConfigError: no such schedule (with the closest names).
    """
    with engine.connect() as conn:
        row = conn.execute(select(schedules).where(schedules.c.name == name)).first()
        if row is not None:
            return Schedule(**row._mapping)
        names = list(conn.execute(select(schedules.c.name)).scalars())
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"Did you mean {close[0]!r}?" if close else "See `seqline schedule list`."
    raise ConfigError(f"no schedule named {name!r} in the run store. {hint}")


def set_paused(engine: Engine, name: str, paused: bool, at: datetime) -> None:
    """Pause a schedule, or resume it (its fire times then count from `at`).

    Args:
        engine: the store's engine.
        name: the schedule.
        paused: True to pause, False to resume.
        at: the time of the change.
    """
    values: dict[str, Any] = {"paused": paused}
    if not paused:  # ticks of the paused time are not caught up: pausing is deliberate
        values["since"] = at
    with writing(engine) as conn:
        conn.execute(update(schedules).where(schedules.c.name == name).values(**values))


def delete_schedule(engine: Engine, name: str) -> int:
    """Remove a schedule and its ticks (its runs stay in the store).

    Returns:
        How many ticks went with it.
    """
    with writing(engine) as conn:  # explicit: foreign keys may be off on an old connection
        gone = conn.execute(delete(ticks).where(ticks.c.schedule == name)).rowcount
        conn.execute(delete(schedules).where(schedules.c.name == name))
    return int(gone)


# -- ticks ------------------------------------------------------------------------------------

def record_ticks(engine: Engine, rows: list[dict[str, Any]]) -> None:
    """Record ticks in one transaction; a (schedule, fire time, trigger) already there is kept.

    Args:
        engine: the store's engine.
        rows: dicts with schedule, fire_time, trigger, status, run_id and reason.
    """
    if not rows:
        return
    stamp = now()
    with writing(engine) as conn:
        statement = insert_ignoring(conn, ticks, ["schedule", "fire_time", "trigger"])
        conn.execute(statement, [{**row, "recorded": stamp} for row in rows])


def update_tick(engine: Engine, tick_id: int, **values: Any) -> None:
    """Change a tick's status, reason, run_id, launched, host or pid.

    Args:
        engine: the store's engine.
        tick_id: the tick.
        values: the columns to set.
    """
    with writing(engine) as conn:
        conn.execute(update(ticks).where(ticks.c.id == tick_id).values(**values))


def latest_tick(engine: Engine, name: str, trigger: str = "schedule",
                statuses: tuple[str, ...] | None = None) -> Tick | None:
    """A schedule's tick with the latest fire time, optionally among some statuses.

    Args:
        engine: the store's engine.
        name: the schedule.
        trigger: schedule or backfill.
        statuses: only ticks in these statuses (None: any).

    Returns:
        The tick, or None.
    """
    query = (select(ticks).where(ticks.c.schedule == name, ticks.c.trigger == trigger)
             .order_by(ticks.c.fire_time.desc()).limit(1))
    if statuses is not None:
        query = query.where(ticks.c.status.in_(statuses))
    with engine.connect() as conn:
        row = conn.execute(query).first()
    return Tick(**row._mapping) if row else None


def ticks_with_status(engine: Engine, statuses: tuple[str, ...], trigger: str = "schedule",
                      name: str | None = None) -> list[Tick]:
    """Ticks in some statuses, oldest fire time first (the scheduler's work list).

    Args:
        engine: the store's engine.
        statuses: e.g. ("launching", "queued").
        trigger: schedule or backfill.
        name: only this schedule's (None: every schedule's).

    Returns:
        The ticks.
    """
    query = (select(ticks).where(ticks.c.status.in_(statuses), ticks.c.trigger == trigger)
             .order_by(ticks.c.fire_time, ticks.c.id))
    if name is not None:
        query = query.where(ticks.c.schedule == name)
    with engine.connect() as conn:
        return [Tick(**r._mapping) for r in conn.execute(query)]


def ticks_of(engine: Engine, name: str, limit: int | None = None,
             since: datetime | None = None) -> list[Tick]:
    """A schedule's ticks, newest fire time first.

    Args:
        engine: the store's engine.
        name: the schedule.
        limit: at most this many.
        since: only fire times at or after this.

    Returns:
        The ticks.
    """
    query = select(ticks).where(ticks.c.schedule == name).order_by(
        ticks.c.fire_time.desc(), ticks.c.trigger)
    if since is not None:
        query = query.where(ticks.c.fire_time >= since)
    if limit is not None:
        query = query.limit(limit)
    with engine.connect() as conn:
        return [Tick(**r._mapping) for r in conn.execute(query)]


def run_states(engine: Engine, run_ids: list[str]) -> dict[str, str]:
    """The status of each run that the store has.

    Args:
        engine: the store's engine.
        run_ids: the runs.

    Returns:
        {run_id: status}; a run not (yet) in the store is absent.
    """
    if not run_ids:
        return {}
    with engine.connect() as conn:
        rows = conn.execute(select(runs.c.run_id, runs.c.status)
                            .where(runs.c.run_id.in_(run_ids)))
        return {r.run_id: r.status for r in rows}


def tick_rows(found: list[Tick], states: dict[str, str]) -> list[dict[str, Any]]:
    """Ticks as `schedule show --json` prints them.

    Args:
        found: ticks, in the order to print.
        states: {run_id: status} (from `run_states`).

    Returns:
        Dicts of fire_time, status, run_id, reason, trigger, run_status, launched.
    """
    return [{"fire_time": iso(t.fire_time), "status": t.status, "run_id": t.run_id
             if t.status in ("launching", "launched") else None,
             "reason": t.reason, "trigger": t.trigger,
             "run_status": states.get(t.run_id or ""), "launched": iso(t.launched)}
            for t in found]


# -- the scheduler lease ----------------------------------------------------------------------

def acquire_lease(engine: Engine, host: str, pid: int, token: str, at: datetime,
                  ttl: timedelta, holder_gone: Any) -> None:
    """Take the store's scheduler lease, or refuse with who holds it.

    The lease is free when there is none, when it expired, when its holder is this token,
    or when `holder_gone(host, pid)` says its process is dead.

    Args:
        engine: the store's engine.
        host: this machine.
        pid: this process.
        token: this scheduler (a fresh random string per process).
        at: the time now.
        ttl: how long the lease lasts unless renewed.
        holder_gone: a callable (host, pid) -> bool.

    Raises:
        LeaseHeld: another live scheduler holds it.
    """
    mine = {"id": 1, "host": host, "pid": pid, "token": token, "acquired": at,
            "expires": at + ttl}
    try:
        with writing(engine) as conn:
            query = select(scheduler_lease).where(scheduler_lease.c.id == 1)
            if conn.dialect.name == "postgresql":  # SQLite's IMMEDIATE already locks
                query = query.with_for_update()
            held = conn.execute(query).first()
            if held is None:
                conn.execute(insert(scheduler_lease).values(**mine))
                return
            if held.token != token and held.expires > at \
                    and not holder_gone(held.host, held.pid):
                raise _held(held)
            conn.execute(update(scheduler_lease).where(scheduler_lease.c.id == 1)
                         .values(**mine))
    except IntegrityError:  # PostgreSQL: two schedulers inserted the first row at once
        with engine.connect() as conn:
            held = conn.execute(select(scheduler_lease)).first()
        raise _held(held) from None


def _held(held: Any) -> LeaseHeld:
    return LeaseHeld(f"another scheduler holds this run store's lease: host {held.host}, "
                     f"PID {held.pid}, until {iso(held.expires)} unless it renews it. Stop "
                     "that one first (one scheduler per store).", held.host, held.pid)


def renew_lease(engine: Engine, token: str, at: datetime, ttl: timedelta) -> bool:
    """Extend the lease this token holds.

    Returns:
        False when it is no longer ours (it expired and another scheduler took it).
    """
    with writing(engine) as conn:
        done = conn.execute(update(scheduler_lease).where(scheduler_lease.c.token == token)
                            .values(expires=at + ttl))
    return bool(done.rowcount)


def release_lease(engine: Engine, token: str) -> None:
    """Give the lease up (a scheduler stopping), if this token still holds it."""
    with writing(engine) as conn:
        conn.execute(delete(scheduler_lease).where(scheduler_lease.c.token == token))
