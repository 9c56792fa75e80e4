"""The scheduler driven through days by a simulated clock, on a real run store.

Launching is the one stand-in: `StoreLauncher` records the run in the store as `seqline run`
does first (same row, same primary key), and the test ends runs when their simulated time is
up. Everything else is the real thing: ticks, the lease, the reaper, the policies.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from seqline.orchestration.schedule.backfill import Backfill
from seqline.orchestration.schedule.daemon import LEASE_TTL, LeaseLost, Scheduler
from seqline.orchestration.schedule.launch import LaunchRequest
from seqline.orchestration.schedule.spec import new_schedule
from seqline.orchestration.store import LeaseHeld, RunIdTaken, RunStore
from seqline.orchestration.store.tables import runs, ticks
from seqline.pipeline.errors import ConfigError

T0 = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)
PIPELINE = """\
name: tiny
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv]}}
"""


class Clock:
    """A settable clock: the scheduler asks it for the time."""

    def __init__(self, t: datetime) -> None:
        self.t = t

    def __call__(self) -> datetime:
        return self.t


class StoreLauncher:
    """Starts a run the way `seqline run` begins one: its row in the run store, running."""

    def __init__(self, store: RunStore, clock: Clock, lasts: timedelta = timedelta(0)) -> None:
        self.store, self.clock, self.lasts = store, clock, lasts
        self.launched: list[LaunchRequest] = []
        self.ends: dict[str, datetime] = {}
        self.most_at_once = 0

    def __call__(self, request: LaunchRequest) -> None:
        self.store.create_run(request.run_id, "tiny", pipeline_file=request.pipeline,
                              fingerprint=None, runner=request.runner, options={},
                              trigger=request.trigger)
        self.launched.append(request)
        self.ends[request.run_id] = self.clock() + self.lasts
        self.most_at_once = max(self.most_at_once, len(self.going()))

    def going(self) -> list[str]:
        return [r for r, end in self.ends.items() if end is not None]

    def finish_due(self) -> None:
        """End the runs whose simulated duration is over."""
        for run_id, end in self.ends.items():
            if end is not None and end <= self.clock():
                self.store.finish_run(run_id, "succeeded")
                self.ends[run_id] = None


@pytest.fixture
def store_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'seqline.db'}"


@pytest.fixture
def store(store_url):
    opened = RunStore(store_url)
    yield opened
    opened.close()


@pytest.fixture
def pipeline(tmp_path) -> Path:
    (tmp_path / "in.csv").write_text("x\n1\n")
    (tmp_path / "tiny.yaml").write_text(PIPELINE)
    return tmp_path / "tiny.yaml"


def _add(store, pipeline, clock, name="job", cron="0 * * * *", **options):
    schedule, _ = new_schedule(name, pipeline, cron, at=clock(), **options)
    store.schedules.add_schedule(schedule)
    return schedule


def _scheduler(store, clock, launcher=None, **options):
    launcher = launcher or StoreLauncher(store, clock, **options)
    scheduler = Scheduler(store, launcher, clock=clock)
    scheduler.acquire()
    return scheduler, launcher


def _drive(scheduler, clock, until, launcher=None, lag=timedelta(seconds=1)):
    """Pass at each next fire time and each end of a run (plus `lag`, the loop's delay)
    until `until`: what the daemon's each-second loop sees, without the idle passes."""
    scheduler.tick_once()
    while (wake := _next_event(scheduler, launcher)) is not None and wake + lag <= until:
        clock.t = wake + lag
        if launcher is not None:
            launcher.finish_due()
        scheduler.tick_once()
    clock.t = until


def _next_event(scheduler, launcher):
    ends = [end for end in launcher.ends.values() if end is not None] if launcher else []
    times = [t for t in [scheduler.wakeup(), *ends] if t is not None]
    return min(times) if times else None


def _ticks(store, name="job"):
    return list(reversed(store.schedules.ticks_of(name)))


@pytest.mark.parametrize(("tz", "cron", "first", "days"), [
    ("America/New_York", "30 2 * * *", datetime(2026, 3, 6, tzinfo=UTC), 5),
    ("America/New_York", "30 1 * * *", datetime(2026, 10, 30, tzinfo=UTC), 5),
    ("Europe/Berlin", "30 2 * * *", datetime(2026, 3, 27, tzinfo=UTC), 5),
    ("Europe/Berlin", "30 2 * * *", datetime(2026, 10, 23, tzinfo=UTC), 5),
])
def test_scheduler_daily_job_runs_once_per_local_day_through_dst(store, pipeline, tz, cron,
                                                                first, days):
    clock = Clock(first)
    _add(store, pipeline, clock, cron=cron, tz=tz)
    scheduler, launcher = _scheduler(store, clock)
    _drive(scheduler, clock, first + timedelta(days=days), launcher)
    ticks = _ticks(store)
    assert [t.status for t in ticks] == ["launched"] * days
    per_day = Counter(t.fire_time.astimezone(ZoneInfo(tz)).date() for t in ticks)
    assert set(per_day.values()) == {1} and len(per_day) == days
    assert [r.run_id for r in launcher.launched] == [t.run_id for t in ticks]
    assert ticks[0].run_id == "job-" + ticks[0].fire_time.strftime("%Y%m%dT%H%M%SZ")


@pytest.mark.parametrize(("overlap", "statuses", "most_at_once"), [
    # Hourly, each run lasts 90 min: skip runs every other hour, queue runs them all one
    # after the other (falling behind), allow runs them all, two at a time.
    ("skip", ["launched", "skipped"] * 3, 1),
    ("queue", ["launched"] * 4 + ["queued"] * 2, 1),
    ("allow", ["launched"] * 6, 2),
])
def test_scheduler_overlap_policies(store, pipeline, overlap, statuses, most_at_once):
    clock = Clock(T0)
    _add(store, pipeline, clock, overlap=overlap)
    scheduler, launcher = _scheduler(store, clock, lasts=timedelta(minutes=90))
    _drive(scheduler, clock, T0 + timedelta(hours=6, minutes=30), launcher)
    ticks = _ticks(store)
    assert [t.status for t in ticks] == statuses
    assert launcher.most_at_once == most_at_once
    if overlap == "skip":
        assert ticks[1].reason == (f"overlap skip: the previous run {ticks[0].run_id} was "
                                   "still going")
        assert ticks[1].run_id is not None and ticks[1].run_id not in launcher.ends
    if overlap == "queue":  # each queued one starts when the one before it ends
        assert ticks[3].reason.startswith("overlap queue: waits for ")
        starts = [s for s, in _run_starts(store)]  # each a second after the last one ended
        assert starts == [T0 + timedelta(hours=1, seconds=1), T0 + timedelta(hours=2.5, seconds=2),
                          T0 + timedelta(hours=4, seconds=3), T0 + timedelta(hours=5.5, seconds=4)]


def _run_starts(store):
    # The launcher's simulated times, recorded on the ticks (the runs' own start is real time).
    with store.engine.connect() as conn:
        return conn.execute(sa.select(ticks.c.launched).where(
            ticks.c.status == "launched").order_by(ticks.c.fire_time)).all()


@pytest.mark.parametrize(("catchup", "launched", "skipped"), [
    ("none", 0, 72), ("latest", 1, 71), ("all", 5, 67)])
def test_scheduler_catch_up_after_a_three_day_outage(store, pipeline, catchup, launched,
                                                    skipped):
    clock = Clock(T0)
    _add(store, pipeline, clock, catchup=catchup, max_catchup=5)
    scheduler, launcher = _scheduler(store, clock, lasts=timedelta(minutes=10))
    _drive(scheduler, clock, T0 + timedelta(minutes=30), launcher)  # up: nothing due yet
    scheduler.release()  # down for three days (a clean stop; a crash is tested below)
    clock.t = T0 + timedelta(days=3, minutes=30)
    # Five catch-up runs of 5 min, one after the other, are done before 01:00 is due.
    restarted, relauncher = _scheduler(store, clock, lasts=timedelta(minutes=5))
    _drive(restarted, clock, T0 + timedelta(days=3, hours=1, minutes=30), relauncher)
    ticks = _ticks(store)
    missed = ticks[:72]  # 01:00 on day 1 ... 00:00 on day 4; then 01:00 on time
    assert Counter(t.status for t in missed) == Counter(
        {"launched": launched, "skipped": skipped} if launched else {"skipped": skipped})
    assert ticks[72].status == "launched" and len(ticks) == 73
    if catchup == "all":  # the most recent 5, oldest first, one after the other
        assert [r.fire_time for r in relauncher.launched[:5]] == [t.fire_time
                                                                  for t in missed[-5:]]
        assert relauncher.most_at_once == 1
    assert all("missed (found" in t.reason for t in missed if t.status == "skipped")


class Killed(BaseException):
    """The scheduler process dying where the launcher is called (SIGKILL, power cut)."""


def test_scheduler_killed_between_recording_and_launching_relaunches_once(store, pipeline):
    clock = Clock(T0 + timedelta(minutes=59))
    _add(store, pipeline, clock)

    def dies(request):
        raise Killed

    first, _ = _scheduler(store, clock, launcher=dies)
    clock.t = T0 + timedelta(hours=1, seconds=1)
    with pytest.raises(Killed):
        first.tick_once()
    [tick] = _ticks(store)
    assert (tick.status, tick.run_id) == ("launching", "job-20261120T010000Z")
    with pytest.raises(LeaseHeld, match=r"host .*, PID \d+"):  # its lease outlives it a while
        _scheduler(store, clock)
    clock.t += LEASE_TTL
    second, launcher = _scheduler(store, clock)
    second.tick_once()
    second.tick_once()
    assert [r.run_id for r in launcher.launched] == ["job-20261120T010000Z"]
    assert [t.status for t in _ticks(store)] == ["launched"]
    with pytest.raises(RunIdTaken):  # a third try at the tick is refused by the primary key
        launcher(launcher.launched[0])


def test_scheduler_killed_after_launching_does_not_launch_again(store, pipeline):
    clock = Clock(T0 + timedelta(minutes=59))
    _add(store, pipeline, clock)
    real = StoreLauncher(store, clock)

    def launches_then_dies(request):
        real(request)
        raise Killed

    first, _ = _scheduler(store, clock, launcher=launches_then_dies)
    clock.t = T0 + timedelta(hours=1, seconds=1)
    with pytest.raises(Killed):
        first.tick_once()
    clock.t += LEASE_TTL
    second, launcher = _scheduler(store, clock)
    second.tick_once()
    assert launcher.launched == [] and len(real.launched) == 1
    [tick] = _ticks(store)
    assert (tick.status, tick.reason) == ("launched", "launched by an earlier scheduler process")
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(runs)).scalar() == 1


def test_scheduler_second_one_is_refused_until_the_first_stops(store):
    clock = Clock(T0)
    first, _ = _scheduler(store, clock)
    with pytest.raises(LeaseHeld) as refused:
        _scheduler(store, clock)
    assert refused.value.pid == __import__("os").getpid()
    assert "another scheduler holds this run store's lease" in str(refused.value)
    first.release()
    _scheduler(store, clock)  # free now


def test_scheduler_lease_of_a_dead_process_is_taken_at_once(store):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    clock = Clock(T0)
    store.schedules.acquire_lease(__import__("socket").gethostname(), int(done.stdout),
                                  "dead", T0, LEASE_TTL, lambda host, pid: False)
    _scheduler(store, clock)  # its pid is gone: no need to wait for the expiry


def test_scheduler_that_stalled_past_its_lease_stops(store):
    clock = Clock(T0)
    first, _ = _scheduler(store, clock)
    clock.t += LEASE_TTL + timedelta(seconds=1)  # stalled: no renewal
    _scheduler(store, clock)  # a successor takes the expired lease
    with pytest.raises(LeaseLost, match="lost the run store's lease"):
        first.tick_once()


def test_scheduler_paused_schedule_records_nothing_and_resumes_without_catch_up(store,
                                                                               pipeline):
    clock = Clock(T0)
    _add(store, pipeline, clock, catchup="all")
    scheduler, launcher = _scheduler(store, clock)
    _drive(scheduler, clock, T0 + timedelta(hours=2, minutes=30), launcher)
    store.schedules.set_paused("job", True, clock())
    _drive(scheduler, clock, T0 + timedelta(hours=6, minutes=30), launcher)
    assert len(_ticks(store)) == 2
    store.schedules.set_paused("job", False, clock())
    _drive(scheduler, clock, T0 + timedelta(hours=8, minutes=30), launcher)
    fired = [t.fire_time.hour for t in _ticks(store)]
    assert fired == [1, 2, 7, 8]  # 3:00 to 6:00 were paused: not recorded, not caught up


def test_scheduler_removed_schedule_takes_its_ticks_and_leaves_its_runs(store, pipeline):
    clock = Clock(T0)
    _add(store, pipeline, clock)
    scheduler, launcher = _scheduler(store, clock)
    _drive(scheduler, clock, T0 + timedelta(hours=2, minutes=30), launcher)
    assert store.schedules.delete_schedule("job") == 2
    _drive(scheduler, clock, T0 + timedelta(hours=4), launcher)
    assert _ticks(store) == [] and len(store.list_runs()) == 2


def test_backfill_runs_each_fire_time_oldest_first_a_few_at_a_time(store, pipeline):
    clock = Clock(T0)
    schedule = _add(store, pipeline, clock, cron="0 3 * * *", tz="Europe/Berlin")
    launcher = StoreLauncher(store, clock, lasts=timedelta(minutes=5))

    def sleep(seconds):  # each poll, five simulated minutes pass and runs end
        clock.t += timedelta(minutes=5)
        launcher.finish_due()

    backfill = Backfill(store, launcher, clock=clock, sleep=sleep)
    start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 5, 23, tzinfo=UTC)
    outcome = backfill.run(schedule, start, end, max_active=2)
    assert [o.tick.run_id for o in outcome] == [
        f"job-backfill-202611{d:02d}T020000Z" for d in range(1, 6)]  # 03:00 CET = 02:00 UTC
    assert {(o.run_status, o.launched_now) for o in outcome} == {("succeeded", True)}
    assert [r.run_id for r in launcher.launched] == [o.tick.run_id for o in outcome]
    assert launcher.most_at_once == 2
    assert {r["trigger"] for r in store.list_runs()} == {"backfill"}
    again = backfill.run(schedule, start, end, max_active=2)  # done already: nothing new
    assert len(again) == 5 and len(launcher.launched) == 5
    assert not any(o.launched_now for o in again)
    assert store.schedules.ticks_of("job")[0].trigger == "backfill"


def test_backfill_again_launches_only_the_fire_times_left_without_a_run(store, pipeline):
    """A launch that failed and a run that never reached the store are launched again; a
    fire time with a run (one that failed included: it is resumed, not relaunched) is not."""
    clock = Clock(T0)
    schedule = _add(store, pipeline, clock, cron="0 3 * * *")
    launcher = StoreLauncher(store, clock, lasts=timedelta(minutes=5))
    day = [f"job-backfill-202611{d:02d}T030000Z" for d in range(1, 5)]

    def first_try(request):
        if request.run_id == day[0]:
            raise ConfigError(f"the pipeline file {request.pipeline} is missing")
        if request.run_id == day[1]:
            return None  # its process died before it recorded the run
        launcher(request)
        if request.run_id == day[3]:
            store.finish_run(request.run_id, "failed")
            launcher.ends[request.run_id] = None

    def sleep(seconds):
        clock.t += timedelta(minutes=5)
        launcher.finish_due()

    start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 4, 12, tzinfo=UTC)
    first = Backfill(store, first_try, clock=clock, sleep=sleep).run(schedule, start, end, 1)
    assert [(o.tick.status, o.run_status) for o in first] == [
        ("failed", None), ("launched", None), ("launched", "succeeded"), ("launched", "failed")]
    again = Backfill(store, launcher, clock=clock, sleep=sleep).run(schedule, start, end, 1)
    assert [r.run_id for r in launcher.launched] == [day[2], day[3], day[0], day[1]]
    assert [(o.run_status, o.launched_now) for o in again] == [
        ("succeeded", True), ("succeeded", True), ("succeeded", False), ("failed", False)]
