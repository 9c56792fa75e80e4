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

__all__ = ["Backfill", "MAX_FIRE_TIMES", "backfill_ticks"]

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


@dataclass
class Backfill:
    """Runs a schedule's past fire times, recorded as ticks with trigger `backfill`.

    Every fire time is first recorded as a queued tick (unique per schedule, fire time and
    trigger, so running the same backfill again only finishes what is left), then launched
    oldest first with at most `max_active` runs going at once.
    """

    store: RunStore
    launcher: Launcher
    clock: Callable[[], datetime] = now
    sleep: Callable[[float], None] = time.sleep
    log: Callable[[str], None] = lambda line: None
    poll_s: float = 1.0  # how often the runs' states are read from the store

    def run(self, schedule: Schedule, start: datetime, end: datetime,
            max_active: int) -> list[tuple[Tick, str | None]]:
        """Backfill [start, end] and wait until every run has ended.

        Args:
            schedule: the schedule.
            start: the first time of the range.
            end: the last.
            max_active: at most this many runs at once.

        Returns:
            Each tick of the range, oldest first, with its run's final status (None: no run,
            or one that never reached the store; see its log).
        """
        stored = self.store.schedules
        fires = backfill_ticks(schedule, start, end)
        stored.record_ticks([
            {"schedule": schedule.name, "fire_time": fire, "trigger": "backfill",
             "status": TickStatus.queued, "reason": None,
             "run_id": run_id_for(schedule.name, fire, "backfill")} for fire in fires])
        self.log(f"{schedule.name}: backfill of {len(fires)} fire time(s) from "
                 f"{iso(fires[0])} to {iso(fires[-1])}, at most {max_active} at once")
        while True:
            self.store.reap_interrupted()
            mine = self._ticks(schedule, fires)
            waiting = [t for t in mine if t.status in (TickStatus.queued, TickStatus.launching)]
            going = [t for t in mine if t.status == TickStatus.launched
                     and run_going(stored, t, self.clock())]
            if not waiting and not going:
                break
            for tick in waiting[:max(0, max_active - len(going))]:
                self._start(schedule, tick)
            self.sleep(self.poll_s)
        done = self._ticks(schedule, fires)
        states = stored.run_states([t.run_id for t in done if t.run_id])
        return [(t, states.get(t.run_id or "") if t.status == TickStatus.launched else None)
                for t in done]

    def _ticks(self, schedule: Schedule, fires: list[datetime]) -> list[Tick]:
        found = self.store.schedules.ticks_of(schedule.name, since=fires[0])
        return sorted((t for t in found if t.trigger == "backfill" and t.fire_time <= fires[-1]),
                      key=lambda t: t.fire_time)

    def _start(self, schedule: Schedule, tick: Tick) -> None:
        """Launch a waiting tick, unless its run id is already in the store."""
        stored = self.store.schedules
        if tick.run_id and stored.run_states([tick.run_id]):
            # A backfill killed after launching, before saying so; or an older run with
            # this id (the schedule removed and added again): never a second run of an id.
            status = TickStatus.launched if tick.status == TickStatus.launching \
                else TickStatus.skipped
            stored.update_tick(tick.id, status=status, reason=f"run {tick.run_id} is "
                               "already in the run store")
            return
        stored.update_tick(tick.id, status=TickStatus.launching)  # a kill from here: relaunched
        launch_tick(stored, self.launcher, schedule, tick, self.clock(), self.log)
