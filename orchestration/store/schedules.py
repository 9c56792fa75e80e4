"""Schedules, their ticks and the scheduler lease: the store's schedule storage, one class."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, delete, exists, insert, select, update
from sqlalchemy.exc import IntegrityError

from seqline.orchestration.store.engine import writing
from seqline.orchestration.store.errors import LeaseHeld, ScheduleExists, ScheduleNotFound
from seqline.orchestration.store.rows import insert_ignoring, iso, now
from seqline.orchestration.store.statuses import TickStatus
from seqline.orchestration.store.tables import runs, scheduler_lease, schedules, ticks

__all__ = ["Schedule", "ScheduleStore", "Tick"]


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


class ScheduleStore:
    """Schedules, ticks and the one scheduler lease of a run store (each call one short
    transaction). A tick is recorded before its run is launched, unique per schedule, fire
    time and trigger: killed at any moment and restarted, no tick runs twice, none is lost."""

    def __init__(self, engine: Engine) -> None:
        """Args:
            engine: the store's engine, migrated.
        """
        self.engine = engine

    # -- schedules ----------------------------------------------------------------------------

    def add_schedule(self, schedule: Schedule) -> None:
        """Record a new schedule, already validated.

        Raises:
            ScheduleExists: the name is taken (the primary key refuses it: no check first).
        """
        try:
            with writing(self.engine) as conn:
                conn.execute(insert(schedules).values(**vars(schedule)))
        except IntegrityError as exc:
            raise ScheduleExists(f"a schedule named {schedule.name!r} already exists: choose "
                                 "another name, or `seqline schedule remove` it first.") from exc

    def list_schedules(self) -> list[Schedule]:
        """Every schedule, by name."""
        with self.engine.connect() as conn:
            return [Schedule(**r._mapping) for r in
                    conn.execute(select(schedules).order_by(schedules.c.name))]

    def get_schedule(self, name: str) -> Schedule:
        """The schedule called `name`.

        Raises:
            ScheduleNotFound: no such schedule (the message names the closest one).
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(schedules).where(schedules.c.name == name)).first()
            if row is not None:
                return Schedule(**row._mapping)
            names = list(conn.execute(select(schedules.c.name)).scalars())
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"Did you mean {close[0]!r}?" if close else "See `seqline schedule list`."
        raise ScheduleNotFound(f"no schedule named {name!r} in the run store. {hint}", name)

    def set_paused(self, name: str, paused: bool, at: datetime) -> None:
        """Pause a schedule, or resume it (its fire times then count from `at`)."""
        values: dict[str, Any] = {"paused": paused}
        if not paused:  # ticks of the paused time are not caught up: pausing is deliberate
            values["since"] = at
        with writing(self.engine) as conn:
            conn.execute(update(schedules).where(schedules.c.name == name).values(**values))

    def delete_schedule(self, name: str) -> int:
        """Remove a schedule and its ticks (its runs stay in the store).

        Returns:
            How many ticks went with it.
        """
        with writing(self.engine) as conn:  # explicit: foreign keys may be off on an old one
            gone = conn.execute(delete(ticks).where(ticks.c.schedule == name)).rowcount
            conn.execute(delete(schedules).where(schedules.c.name == name))
        return int(gone)

    # -- ticks --------------------------------------------------------------------------------

    def record_ticks(self, rows: list[dict[str, Any]]) -> None:
        """Record ticks in one transaction; a (schedule, fire time, trigger) already there is
        kept.

        Args:
            rows: dicts with schedule, fire_time, trigger, status, run_id and reason.
        """
        if not rows:
            return
        stamp = now()
        with writing(self.engine) as conn:
            statement = insert_ignoring(conn, ticks, ["schedule", "fire_time", "trigger"])
            conn.execute(statement, [{**row, "recorded": stamp} for row in rows])

    def update_tick(self, tick_id: int, **values: Any) -> None:
        """Change a tick's status, reason, run_id, launched, host or pid."""
        with writing(self.engine) as conn:
            conn.execute(update(ticks).where(ticks.c.id == tick_id).values(**values))

    def latest_tick(self, name: str, trigger: str = "schedule",
                    statuses: tuple[str, ...] | None = None) -> Tick | None:
        """A schedule's tick with the latest fire time, optionally among some statuses.

        Args:
            name: the schedule.
            trigger: schedule or backfill.
            statuses: only ticks in these statuses (None: any).
        """
        query = (select(ticks).where(ticks.c.schedule == name, ticks.c.trigger == trigger)
                 .order_by(ticks.c.fire_time.desc()).limit(1))
        if statuses is not None:
            query = query.where(ticks.c.status.in_(statuses))
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return Tick(**row._mapping) if row else None

    def ticks_with_status(self, statuses: tuple[str, ...], trigger: str = "schedule",
                          name: str | None = None) -> list[Tick]:
        """Ticks in some statuses, oldest fire time first (the scheduler's work list).

        Args:
            statuses: e.g. ("launching", "queued").
            trigger: schedule or backfill.
            name: only this schedule's (None: every schedule's).
        """
        query = (select(ticks).where(ticks.c.status.in_(statuses), ticks.c.trigger == trigger)
                 .order_by(ticks.c.fire_time, ticks.c.id))
        if name is not None:
            query = query.where(ticks.c.schedule == name)
        with self.engine.connect() as conn:
            return [Tick(**r._mapping) for r in conn.execute(query)]

    def ticks_of(self, name: str, limit: int | None = None,
                 since: datetime | None = None) -> list[Tick]:
        """A schedule's ticks, newest fire time first.

        Args:
            name: the schedule.
            limit: at most this many.
            since: only fire times at or after this.
        """
        query = select(ticks).where(ticks.c.schedule == name).order_by(
            ticks.c.fire_time.desc(), ticks.c.trigger)
        if since is not None:
            query = query.where(ticks.c.fire_time >= since)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [Tick(**r._mapping) for r in conn.execute(query)]

    def tick_of_run(self, run_id: str) -> Tick | None:
        """The tick that launched `run_id` (the newest, if a tick was relaunched), or None
        for a run started by hand."""
        with self.engine.connect() as conn:
            row = conn.execute(select(ticks).where(ticks.c.run_id == run_id)
                               .order_by(ticks.c.id.desc()).limit(1)).first()
        return Tick(**row._mapping) if row else None

    def launched_without_run(self, host: str) -> list[Tick]:
        """The `launched` ticks started on `host` whose run is not in the store, oldest first.

        A run records itself a second or two after its process starts; one that never does
        died starting (a full disk, a store that refused the write). The scheduler asks this
        of ticks a killed predecessor launched, whose exit it cannot collect.

        Args:
            host: the machine whose ticks to look at (pids mean nothing elsewhere).
        """
        recorded = exists(select(runs.c.run_id).where(runs.c.run_id == ticks.c.run_id))
        query = (select(ticks).where(ticks.c.status == TickStatus.launched,
                                     ticks.c.host == host, ~recorded)
                 .order_by(ticks.c.fire_time, ticks.c.id))
        with self.engine.connect() as conn:
            return [Tick(**r._mapping) for r in conn.execute(query)]

    def run_states(self, run_ids: list[str]) -> dict[str, str]:
        """The status of each run the store has, {run_id: status}; one not (yet) in it is
        absent (a tick's run starts after the tick is recorded)."""
        if not run_ids:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(select(runs.c.run_id, runs.c.status)
                                .where(runs.c.run_id.in_(run_ids)))
            return {r.run_id: r.status for r in rows}

    # -- the scheduler lease ------------------------------------------------------------------

    def acquire_lease(self, host: str, pid: int, token: str, at: datetime, ttl: timedelta,
                      holder_gone: Callable[[str, int], bool]) -> None:
        """Take the store's scheduler lease, or refuse with who holds it.

        The lease is free when there is none, when it expired, when its holder is this token,
        or when `holder_gone(host, pid)` says its process is dead.

        Args:
            host: this machine.
            pid: this process.
            token: this scheduler (a fresh random string per process).
            at: the time now.
            ttl: how long the lease lasts unless renewed.
            holder_gone: (host, pid) -> whether that process is dead.

        Raises:
            LeaseHeld: another live scheduler holds it.
        """
        mine = {"id": 1, "host": host, "pid": pid, "token": token, "acquired": at,
                "expires": at + ttl}
        try:
            with writing(self.engine) as conn:
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
            with self.engine.connect() as conn:
                held = conn.execute(select(scheduler_lease)).first()
            raise _held(held) from None

    def renew_lease(self, token: str, at: datetime, ttl: timedelta) -> bool:
        """Extend the lease this token holds; False when it is no longer ours (it expired and
        another scheduler took it)."""
        with writing(self.engine) as conn:
            done = conn.execute(update(scheduler_lease).where(scheduler_lease.c.token == token)
                                .values(expires=at + ttl))
        return bool(done.rowcount)

    def release_lease(self, token: str) -> None:
        """Give the lease up (a scheduler stopping), if this token still holds it."""
        with writing(self.engine) as conn:
            conn.execute(delete(scheduler_lease).where(scheduler_lease.c.token == token))


def _held(held: Any) -> LeaseHeld:
    return LeaseHeld(f"another scheduler holds this run store's lease: host {held.host}, "
                     f"PID {held.pid}, until {iso(held.expires)} unless it renews it. Stop "
                     "that one first (one scheduler per store).", held.host, held.pid)
