"""The scheduler: each second, record every due tick in the run store, then launch its run."""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.exc import OperationalError

from seqline.orchestration.processes import pid_runs, tidy_scratch
from seqline.orchestration.schedule.backoff import waits
from seqline.orchestration.schedule.launch import Launcher
from seqline.orchestration.schedule.runs import launch_tick, run_going
from seqline.orchestration.schedule.ticks import decide, due_fire_times, first_after
from seqline.orchestration.schedule.times import next_fire_times, run_id_for
from seqline.orchestration.store import RunStore, Schedule, ScheduleNotFound, Tick
from seqline.orchestration.store.errors import database_words
from seqline.orchestration.store.liveness import HOST, pid_alive
from seqline.orchestration.store.rows import iso, now
from seqline.orchestration.store.statuses import TickStatus
from seqline.pipeline.errors import SeqlineError

__all__ = ["LEASE_TTL", "LeaseLost", "Scheduler"]

# The lease outlives a few missed renewals (a slow disk, a busy database) but not a dead
# scheduler for long: a successor on another host waits at most this long. On the same host a
# dead holder's lease is taken at once (its pid is gone).
LEASE_TTL = timedelta(seconds=30)
RENEW_EVERY = timedelta(seconds=5)
# The scheduler outlives the runs it starts: it removes the scratch folders of drivers that
# were SIGKILLed (nothing in them could) this often, so none waits for the next run to go.
TIDY_EVERY_S = 60.0
# Why a tick fails whose run never recorded itself, found after whoever launched it (a killed
# scheduler, a backfill) could no longer collect the exit code: only the pid's end is known.
ENDED_UNRECORDED = ("its run process ended before recording the run {run_id} in the run store; "
                    "its exit code is not known (see its log)")


class LeaseLost(SeqlineError):
    """Another scheduler took this one's lease (it stalled past LEASE_TTL): stop at once."""


class Scheduler:
    """Turns fire times into ticks and ticks into runs, for every schedule of one store.

    Each due fire time is recorded as a tick (unique per schedule and fire time, with its
    run id, derived from the fire time) before its run is launched. A scheduler killed
    between the two leaves the tick `launching`; the next one launches it with the same id,
    and the run store's primary key refuses a second run of that id: killed at any moment
    and restarted, no tick is launched twice and none is lost.
    """

    def __init__(self, store: RunStore, launcher: Launcher,
                 clock: Callable[[], datetime] = now,
                 log: Callable[[str], None] = lambda line: None) -> None:
        """Args:
            store: the run store (its schedules, and the reaper of dead runs).
            launcher: starts a run (`ProcessLauncher` or, in tests, a stand-in).
            clock: the time now, aware UTC (tests drive it through days).
            log: where each tick's line goes (the CLI: stderr).
        """
        self.store = store
        self.schedules = store.schedules
        self.launcher = launcher
        self.clock = clock
        self.log = log
        self.token = secrets.token_hex(16)
        self.renewed: datetime | None = None
        self.next_due: dict[str, datetime | None] = {}  # cache: skip idle schedules cheaply
        self.launched: dict[str, Tick] = {}  # run id -> its tick, while its process runs
        # run id -> exit code and one-line error, not yet checked in the store
        self.exited: dict[str, tuple[int, str | None]] = {}

    # -- the lease --------------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the store's lease (one scheduler per store).

        Raises:
            LeaseHeld: another live scheduler holds it (host and pid in the message).
        """
        at = self.clock()
        self.schedules.acquire_lease(HOST, os.getpid(), self.token, at, LEASE_TTL,
                                     lambda host, pid: host == HOST and not pid_alive(pid))
        self.renewed = at

    def wait_for_lease(self, stop: threading.Event) -> bool:
        """Take the store's lease, trying again, with back-off, while the store refuses the
        write (a full disk, a database away) as a pass does: exiting would leave it to a
        supervisor, which gives up after a few quick restarts (systemd's start limit) or
        backs off for minutes (Kubernetes), where this takes the store as it has room again.

        Args:
            stop: the stop signal (SIGTERM/SIGINT), which ends the wait.

        Returns:
            True once the lease is taken; False if `stop` was set first.

        Raises:
            LeaseHeld: another live scheduler holds it (waiting would not help).
        """
        for wait in waits(stop):
            try:
                self.acquire()
                return True
            except OperationalError as exc:  # said as it happens: the wait may be long
                self.log(f"the run store at {self.store.url} failed to give this scheduler "
                         f"its lease ({database_words(exc)}); trying again in {wait:.0f} s")
        return False

    def release(self) -> None:
        """Give the lease up, so that a successor starts at once. A store that refuses the
        write (a full disk) keeps it until it expires, or until a successor on this host
        finds this process gone: said in one line, and the scheduler stops all the same."""
        try:
            self.schedules.release_lease(self.token)
        except OperationalError as exc:
            self.log(f"the run store at {self.store.url} failed to take back this scheduler's "
                     f"lease ({database_words(exc)}); it expires in "
                     f"{LEASE_TTL.total_seconds():.0f} s, at once for a successor on this host")

    def _renew(self, at: datetime) -> None:
        if self.renewed is not None and at - self.renewed < RENEW_EVERY:
            return
        if not self.schedules.renew_lease(self.token, at, LEASE_TTL):
            raise LeaseLost("this scheduler lost the run store's lease to another one (it "
                            f"stalled over {LEASE_TTL.total_seconds():.0f} s); stopping.")
        self.renewed = at

    # -- the loop ---------------------------------------------------------------------------

    def tick_once(self, at: datetime | None = None) -> None:
        """One pass: renew the lease, relaunch interrupted ticks, then each schedule's
        queue and due fire times.

        Args:
            at: the time now (default: the clock).
        """
        at = at or self.clock()
        self._renew(at)
        self._settle_exited()  # what the last pass could not record (the store was away)
        self._settle_vanished()  # what a killed predecessor launched and could not collect
        self.store.reap_interrupted()  # a run whose driver died no longer counts as going
        pending = self.schedules.ticks_with_status((TickStatus.launching, TickStatus.queued))
        for tick in pending:
            if tick.status == TickStatus.launching:
                self._relaunch(tick, at)
        queued = {t.schedule for t in pending if t.status == TickStatus.queued}
        known, self.next_due = self.next_due, {}  # removed and paused schedules drop out
        for schedule in self.schedules.list_schedules():
            if schedule.paused:
                continue
            if schedule.name in queued:
                self._dequeue(schedule, at)
            key = self._key(schedule)
            self.next_due[key] = known.get(key, at)  # a schedule not seen yet: look now
            due_at = self.next_due[key]
            if due_at is not None and due_at <= at:
                self._fire(schedule, at)

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Take the lease (`wait_for_lease`), then tick every `interval` seconds until `stop`
        is set (SIGTERM/SIGINT set it).

        Args:
            stop: the stop signal.
            interval: seconds between passes (1 s: a tick starts within about a second).
        """
        if not self.wait_for_lease(stop):
            return
        tidied = float("-inf")
        try:
            while not stop.is_set():
                if time.monotonic() - tidied >= TIDY_EVERY_S:
                    tidy_scratch()
                    tidied = time.monotonic()
                try:
                    self.tick_once()
                except OperationalError as exc:  # the database away a moment: try again;
                    # a successor may take the lease meanwhile, and the next renewal says so
                    self.log(f"the run store failed this pass: {str(exc).splitlines()[0]}")
                try:
                    self.reap()
                except OperationalError as exc:  # recorded by the next pass
                    self.log(f"the run store failed this pass: {str(exc).splitlines()[0]}")
                stop.wait(interval)
        finally:
            self.release()

    def reap(self) -> None:
        """Collect the runs whose process ended (the launcher's `reap`, if it has one); a run
        that ended before it was recorded in the store fails its tick, with the reason."""
        reap = getattr(self.launcher, "reap", None)
        last_words = getattr(self.launcher, "last_words", None)
        for run_id, code in (reap() if reap else {}).items():
            words = last_words(run_id) if last_words else None
            # said here too: the run's own log may be on the full disk that ended it
            self.log(f"run {run_id} ended with exit code {code}"
                     + (f": {words}" if words else ""))
            self.exited[run_id] = (code, words)
        self._settle_exited()

    def _settle_exited(self) -> None:
        """A tick whose run's process exited without recording the run (it died starting:
        a full disk, a store that refused the write) says so, as `failed` with the exit code:
        else it would claim a run that no one can find or resume."""
        for run_id, (code, words) in list(self.exited.items()):
            tick = self.launched.get(run_id)
            if tick is not None and not self.schedules.run_states([run_id]):
                said = (f"its run process exited with code {code} before recording run "
                        f"{run_id} in the run store")
                reason = said + (f": {words}" if words else " (see its log)")
                self.schedules.update_tick(tick.id, status=TickStatus.failed, reason=reason)
                # (its last words are the line before: reap said them)
                self.log(f"{tick.schedule}: tick {iso(tick.fire_time)} failed: "
                         + (said if words else reason))
            self.launched.pop(run_id, None)  # recorded (or not needed): else the next pass
            del self.exited[run_id]

    def _settle_vanished(self) -> None:
        """A `launched` tick of this host whose run process is gone without recording the
        run fails with the reason (a scheduler killed before it collected the exit code left
        it so); else it would claim a run that no one can find or resume.

        Its own launches are left to `reap` (which knows the exit code). The process counts
        as the run's only while it still names the run id: its pid may have been reused.
        """
        for tick in self.schedules.launched_without_run(HOST):
            run_id = tick.run_id
            if run_id is None or tick.pid is None or run_id in self.launched or \
                    pid_runs(tick.pid, run_id):
                continue
            if self.schedules.run_states([run_id]):  # it recorded itself as the pid ended
                continue
            reason = ENDED_UNRECORDED.format(run_id=run_id)
            self.schedules.update_tick(tick.id, status=TickStatus.failed, reason=reason)
            self.log(f"{tick.schedule}: tick {iso(tick.fire_time)} failed: {reason}")

    def wakeup(self) -> datetime | None:
        """The earliest next fire time known after the last pass (None: nothing to come).

        A paused schedule's is not counted; one not seen yet makes the next pass due now.
        Tests step a simulated clock to it, driving days of schedules in milliseconds.
        """
        times = [t for t in self.next_due.values() if t is not None]
        return min(times) if times else None

    # -- one schedule -----------------------------------------------------------------------

    def _key(self, schedule: Schedule) -> str:
        """The cache key of a schedule's next fire time: any change to it recomputes."""
        return "|".join(str(v) for v in (schedule.name, schedule.cron, schedule.tz,
                                         schedule.since, schedule.start, schedule.end))

    def _fire(self, schedule: Schedule, at: datetime) -> None:
        """Record this schedule's due fire times as ticks, then launch the ones to run."""
        last = self.schedules.latest_tick(schedule.name)
        after = first_after(schedule, last.fire_time if last else None)
        due = due_fire_times(schedule, after, at)
        if due:
            decisions = decide(schedule, due, at, self._running(schedule, at))
            self.schedules.record_ticks([
                {"schedule": schedule.name, "fire_time": d.fire_time, "trigger": "schedule",
                 "status": d.status, "reason": d.reason,
                 "run_id": run_id_for(schedule.name, d.fire_time, "schedule")}
                for d in decisions])
            recorded = self.schedules.ticks_of(schedule.name, since=due[0])
            for tick in reversed(recorded):  # oldest first: catch-up runs go in order
                if tick.trigger == "schedule" and tick.status == TickStatus.launching:
                    self._launch(schedule, tick, at)
                elif tick.trigger == "schedule":
                    self._say(tick)
        upcoming = next_fire_times(schedule.cron, schedule.tz, due[-1] if due else after, 1,
                                   schedule.end)
        self.next_due[self._key(schedule)] = upcoming[0] if upcoming else None

    def _dequeue(self, schedule: Schedule, at: datetime) -> None:
        """Launch the oldest queued tick once the schedule's previous run has ended."""
        if schedule.overlap != "allow" and self._running(schedule, at) is not None:
            return
        queued = self.schedules.ticks_with_status((TickStatus.queued,), name=schedule.name)
        if queued:
            self.schedules.update_tick(queued[0].id, status=TickStatus.launching)
            self._launch(schedule, queued[0], at)

    def _running(self, schedule: Schedule, at: datetime) -> str | None:
        """The run id of the schedule's previous run if it is still going, else None."""
        tick = self.schedules.latest_tick(schedule.name, statuses=(TickStatus.launched,))
        return tick.run_id if tick is not None and run_going(self.schedules, tick, at) \
            else None

    def _relaunch(self, tick: Tick, at: datetime) -> None:
        """A tick left `launching` by a scheduler that died: launch it, unless its run is
        already in the store (the scheduler died after launching, before saying so)."""
        if tick.run_id and self.schedules.run_states([tick.run_id]):
            self.schedules.update_tick(tick.id, status=TickStatus.launched, launched=at,
                                       reason="launched by an earlier scheduler process")
            return
        try:
            schedule = self.schedules.get_schedule(tick.schedule)
        except ScheduleNotFound:
            return  # removed meanwhile: its ticks went with it
        self.log(f"{tick.schedule}: relaunching tick {iso(tick.fire_time)} (recorded by a "
                 "scheduler that stopped before launching it)")
        self._launch(schedule, tick, at)

    def _launch(self, schedule: Schedule, tick: Tick, at: datetime) -> None:
        if launch_tick(self.schedules, self.launcher, schedule, tick, at, self.log):
            self.launched[tick.run_id or run_id_for(schedule.name, tick.fire_time,
                                                    tick.trigger)] = tick

    def _say(self, tick: Tick) -> None:
        if tick.status in (TickStatus.skipped, TickStatus.queued):
            self.log(f"{tick.schedule}: tick {iso(tick.fire_time)} {tick.status}: {tick.reason}")
