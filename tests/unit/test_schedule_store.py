"""ScheduleStore (store/schedules.py): schedules, ticks and the lease, on a real SQLite store."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from seqline.orchestration.store import (
    Conflict,
    LeaseHeld,
    RunStore,
    Schedule,
    ScheduleExists,
    ScheduleNotFound,
)
from seqline.pipeline.errors import ConfigError

T0 = datetime(2026, 3, 1, 2, 30, tzinfo=UTC)
TTL = timedelta(seconds=30)
NIGHTLY = Schedule(name="nightly", pipeline="/p.yaml", cron="30 2 * * *", tz="UTC",
                   runner="local", workers=2, overlap="skip", catchup="latest", max_catchup=5,
                   start=None, end=None, paused=False, since=T0, created=T0)


@pytest.fixture
def stored(tmp_path):
    with RunStore.open(tmp_path) as store:
        yield store.schedules


def _tick(fire_time: datetime, trigger: str = "schedule", status: str = "launching") -> dict:
    return {"schedule": "nightly", "fire_time": fire_time, "trigger": trigger,
            "status": status, "run_id": f"nightly-{fire_time:%Y%m%d}", "reason": None}


def test_a_schedule_comes_back_as_added_and_its_name_is_taken(stored):
    stored.add_schedule(NIGHTLY)
    assert stored.get_schedule("nightly") == NIGHTLY
    assert stored.list_schedules() == [NIGHTLY]
    with pytest.raises(ScheduleExists, match="'nightly' already exists"):
        stored.add_schedule(NIGHTLY)


@pytest.mark.parametrize(("name", "message"), [
    ("nightli", r"no schedule named 'nightli' in the run store\. Did you mean 'nightly'\?"),
    ("zzz", r"no schedule named 'zzz' in the run store\. See `seqline schedule list`\."),
])
def test_an_unknown_name_is_not_found_with_the_closest(stored, name, message):
    stored.add_schedule(NIGHTLY)
    with pytest.raises(ScheduleNotFound, match=message) as missing:
        stored.get_schedule(name)
    assert missing.value.name == name


def test_resuming_counts_fire_times_from_then(stored):
    stored.add_schedule(NIGHTLY)
    stored.set_paused("nightly", True, T0 + timedelta(days=1))
    assert stored.get_schedule("nightly") == replace(NIGHTLY, paused=True)
    stored.set_paused("nightly", False, T0 + timedelta(days=2))
    assert stored.get_schedule("nightly").since == T0 + timedelta(days=2)


def test_ticks_are_recorded_once_per_fire_time_and_trigger(stored):
    stored.add_schedule(NIGHTLY)
    day = timedelta(days=1)
    stored.record_ticks([_tick(T0), _tick(T0 + day, status="queued")])
    stored.record_ticks([_tick(T0, status="skipped"), _tick(T0, trigger="backfill")])
    assert [(t.fire_time, t.trigger, t.status) for t in stored.ticks_of("nightly")] == [
        (T0 + day, "schedule", "queued"), (T0, "backfill", "launching"),
        (T0, "schedule", "launching")]
    assert stored.latest_tick("nightly").fire_time == T0 + day
    assert stored.latest_tick("nightly", statuses=("launching",)).fire_time == T0
    waiting = stored.ticks_with_status(("launching", "queued"))
    assert [t.fire_time for t in waiting] == [T0, T0 + day]
    stored.update_tick(waiting[0].id, status="launched", launched=T0)
    assert stored.latest_tick("nightly", statuses=("launched",)).launched == T0
    assert stored.ticks_of("nightly", limit=1, since=T0 + day)[0].status == "queued"


def test_run_states_know_only_runs_in_the_store(tmp_path):
    with RunStore.open(tmp_path) as store:
        store.create_run("r1", "p", pipeline_file=None, fingerprint=None, runner="local",
                         options={})
        assert store.schedules.run_states(["r1", "r2"]) == {"r1": "running"}
        assert store.schedules.run_states([]) == {}


def test_removing_a_schedule_takes_its_ticks(stored):
    stored.add_schedule(NIGHTLY)
    stored.record_ticks([_tick(T0), _tick(T0 + timedelta(days=1))])
    assert stored.delete_schedule("nightly") == 2
    assert stored.list_schedules() == [] and stored.ticks_of("nightly") == []


def test_the_lease_is_held_by_one_live_scheduler(stored):
    stored.acquire_lease("h1", 11, "first", T0, TTL, lambda host, pid: False)
    stored.acquire_lease("h1", 11, "first", T0 + TTL / 2, TTL, lambda host, pid: False)
    with pytest.raises(LeaseHeld, match="host h1, PID 11") as held:
        stored.acquire_lease("h2", 22, "second", T0 + TTL / 2, TTL, lambda host, pid: False)
    assert (held.value.host, held.value.pid) == ("h1", 11)
    stored.acquire_lease("h2", 22, "second", T0, TTL, lambda host, pid: pid == 11)  # dead
    assert not stored.renew_lease("first", T0, TTL)  # taken: the first must stop
    assert stored.renew_lease("second", T0 + TTL, TTL)
    stored.release_lease("second")
    stored.acquire_lease("h3", 33, "third", T0 + TTL, TTL, lambda host, pid: False)


def test_conflicts_are_not_configuration_errors():
    for error in (ScheduleExists("x"), LeaseHeld("x", "h", 1)):
        assert isinstance(error, Conflict) and not isinstance(error, ConfigError)
    assert isinstance(ScheduleNotFound("x", "n"), ConfigError)  # a name to fix, as a run id
