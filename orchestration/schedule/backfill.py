"""`seqline backfill`: one run per fire time of a past range, oldest first, a few at a time."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from seqline.orchestration.schedule.launch import Launcher
from seqline.orchestration.schedule.runs import launch_tick, run_going
from seqline.orchestration.schedule.ticks import due_fire_times
from seqline.orchestration.schedule.times import run_id_for
from seqline.orchestration.store import RunStore, Schedule, Tick
from seqline.orchestration.store.rows import iso, now
from seqline.orchestration.store.statuses import TickStatus
from seqline.pipeline.errors import ConfigError

__all__ = ["Backfill", "BackfilledTick", "MAX_FIRE_TIMES", "backfill_ticks"]

# A typo in --from (a year too early on an every-minute cron) would queue half a million runs:
# past this many, the range must be split on purpose.
MAX_FIRE_TIMES = 10_000


def backfill_ticks(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """The fire times of a schedule in [start, end], oldest first.

    Args:
        schedule: the schedule (its cron and zone; its own start, end and pause do not
            limit a backfill: asking for the range is explicit).
        start: the first time of the range.
        end: the last.

    Returns:
        Aware UTC datetimes.

    Raises:
        ConfigError: an empty or reversed range, or one of more than MAX_FIRE_TIMES.
    """
    if end < start:
        raise ConfigError(f"--from {iso(start)} is after --to {iso(end)}: swap them.")
    unbounded = Schedule(**{**vars(schedule), "start": None, "end": None})
    fires = due_fire_times(unbounded, start - timedelta(seconds=1), end)
    if not fires:
        raise ConfigError(f"schedule {schedule.name!r} ({schedule.cron}, {schedule.tz}) has no "
                          f"fire time from {iso(start)} to {iso(end)}: widen the range.")
    if len(fires) > MAX_FIRE_TIMES:
        raise ConfigError(f"{len(fires)} fire times from {iso(start)} to {iso(end)}: at most "
                          f"{MAX_FIRE_TIMES} per backfill; split the range.")
    return fires


@dataclass(frozen=True)
class BackfilledTick:
    """A fire time of a backfill once it has ended: its tick, its run's final status (None:
    no run, or one that never reached the store; see its log), and whether this backfill
    launched its run (False: it had one from an earlier backfill, or its launch failed)."""

    tick: Tick
    run_status: str | None
    launched_now: bool


@dataclass
class Backfill:
    """Runs a schedule's past fire times, recorded as ticks with trigger `backfill`.

    Every fire time is first recorded as a queued tick (unique per schedule, fire time and
    trigger), then launched oldest first with at most `max_active` runs going at once.
    Running the same backfill again launches only the fire times left without a run: never
    launched, a launch that failed, a run that ended before it reached the store. A run that
    failed is not launched again: it is resumed (`seqline run … --resume`), keeping its
    committed stages.
    """

    store: RunStore
    launcher: Launcher
    clock: Callable[[], datetime] = now
    sleep: Callable[[float], None] = time.sleep
    log: Callable[[str], None] = lambda line: None
    poll_s: float = 1.0  # how often the runs' states are read from the store

    def run(self, schedule: Schedule, start: datetime, end: datetime,
            max_active: int) -> list[BackfilledTick]:
        """Backfill [start, end] and wait until every run has ended.

        Args:
            schedule: the schedule.
            start: the first time of the range.
            end: the last.
            max_active: at most this many runs at once.

        Returns:
            Each fire time of the range, oldest first.
        """
        stored = self.store.schedules
        fires = backfill_ticks(schedule, start, end)
        stored.record_ticks([
            {"schedule": schedule.name, "fire_time": fire, "trigger": "backfill",
             "status": TickStatus.queued, "reason": None,
             "run_id": run_id_for(schedule.name, fire, "backfill")} for fire in fires])
        self.store.reap_interrupted()
        left = self._reopen(self._ticks(schedule, fires))
        if left:  # else the caller says there was nothing left to run
            had = f"; {len(fires) - left} already have runs" if left < len(fires) else ""
            self.log(f"{schedule.name}: backfill of {left} fire time(s) from "
                     f"{iso(fires[0])} to {iso(fires[-1])}, at most {max_active} at once{had}")
        launched: set[int] = set()
        while True:
            self.store.reap_interrupted()
            mine = self._ticks(schedule, fires)
            waiting = [t for t in mine if t.status in (TickStatus.queued, TickStatus.launching)]
            going = [t for t in mine if t.status == TickStatus.launched
                     and run_going(stored, t, self.clock())]
            if not waiting and not going:
                break
            for tick in waiting[:max(0, max_active - len(going))]:
                if self._start(schedule, tick):
                    launched.add(tick.id)
            self.sleep(self.poll_s)
        done = self._ticks(schedule, fires)
        states = stored.run_states([t.run_id for t in done if t.run_id])
        return [BackfilledTick(t, states.get(t.run_id or "") if t.status == TickStatus.launched
                               else None, t.id in launched) for t in done]

    def _ticks(self, schedule: Schedule, fires: list[datetime]) -> list[Tick]:
        found = self.store.schedules.ticks_of(schedule.name, since=fires[0])
        return sorted((t for t in found if t.trigger == "backfill" and t.fire_time <= fires[-1]),
                      key=lambda t: t.fire_time)

    def _reopen(self, mine: list[Tick]) -> int:
        """Queue again the ticks an earlier backfill left without a run (a failed launch, a
        run that ended before it reached the store); how many are left to launch."""
        stored = self.store.schedules
        states = stored.run_states([t.run_id for t in mine if t.run_id])
        left = 0
        for tick in mine:
            vanished = tick.status == TickStatus.launched and tick.run_id not in states \
                and not run_going(stored, tick, self.clock())
            if tick.status == TickStatus.failed or vanished:
                stored.update_tick(tick.id, status=TickStatus.queued, reason=None)
            left += tick.status in (TickStatus.queued, TickStatus.launching,
                                    TickStatus.failed) or vanished
        return left

    def _start(self, schedule: Schedule, tick: Tick) -> bool:
        """Launch a waiting tick, unless its run id is already in the store; whether its run
        was launched."""
        stored = self.store.schedules
        if tick.run_id and stored.run_states([tick.run_id]):
            # A backfill killed after launching, before saying so; or an older run with
            # this id (the schedule removed and added again): never a second run of an id.
            status = TickStatus.launched if tick.status == TickStatus.launching \
                else TickStatus.skipped
            stored.update_tick(tick.id, status=status, reason=f"run {tick.run_id} is "
                               "already in the run store")
            return False
        stored.update_tick(tick.id, status=TickStatus.launching)  # a kill from here: relaunched
        return launch_tick(stored, self.launcher, schedule, tick, self.clock(), self.log)
