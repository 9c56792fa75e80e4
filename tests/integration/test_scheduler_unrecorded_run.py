"""A tick whose run's process dies before recording the run (found by benchmarks/soak.py: a full
disk as a scheduled run started) fails with the exit code, instead of claiming a run that
does not exist."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from seqline.orchestration.schedule.daemon import Scheduler
from seqline.orchestration.schedule.launch import ProcessLauncher
from seqline.orchestration.schedule.spec import new_schedule
from seqline.orchestration.store import RunStore
from tests.scheduling import Clock, quick_project

pytestmark = pytest.mark.integration
T0 = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)


def test_a_run_that_exits_before_recording_itself_fails_its_tick_with_the_reason(tmp_path):
    quick_project(tmp_path)
    store = RunStore.open(tmp_path / "root")
    try:
        schedule, _ = new_schedule("quick", tmp_path / "quick.yaml", "0 * * * *", at=T0)
        store.schedules.add_schedule(schedule)
        # A real process that exits 1 at once, recording nothing: what `seqline run` does
        # when the disk is full as it starts (its log cannot even be written).
        launcher = ProcessLauncher(tmp_path / "root", None, tmp_path / "logs",
                                   executable="/bin/false")
        lines: list[str] = []
        clock = Clock(T0 + timedelta(hours=1, seconds=1))
        scheduler = Scheduler(store, launcher, clock=clock, log=lines.append)
        scheduler.acquire()
        scheduler.tick_once()
        [tick] = store.schedules.ticks_of("quick")
        assert tick.status == "launched"
        deadline = time.monotonic() + 30
        while launcher.children and time.monotonic() < deadline:
            scheduler.reap()
            time.sleep(0.05)
        [tick] = store.schedules.ticks_of("quick")
        assert (tick.status, tick.reason) == (
            "failed", "its run process exited with code 1 before recording run "
                      "quick-20261120T010000Z in the run store (see its log)")
        assert "quick: tick 2026-11-20T01:00:00+00:00 failed: its run process exited" in \
            "\n".join(lines)
        scheduler.tick_once()  # nothing left to settle; the next fire time is not due
        assert [t.status for t in store.schedules.ticks_of("quick")] == ["failed"]
    finally:
        store.close()


def test_a_run_that_recorded_itself_keeps_its_tick_launched_whatever_its_exit(tmp_path):
    quick_project(tmp_path)
    store = RunStore.open(tmp_path / "root")
    try:
        schedule, _ = new_schedule("quick", tmp_path / "quick.yaml", "0 * * * *", at=T0,
                                   workers=1)
        store.schedules.add_schedule(schedule)
        launcher = ProcessLauncher(tmp_path / "root", None, tmp_path / "logs")
        scheduler = Scheduler(store, launcher, clock=Clock(T0 + timedelta(hours=1, seconds=1)))
        scheduler.acquire()
        scheduler.tick_once()
        deadline = time.monotonic() + 120
        while launcher.children and time.monotonic() < deadline:
            scheduler.reap()
            time.sleep(0.2)
        [tick] = store.schedules.ticks_of("quick")
        assert (tick.status, tick.reason) == ("launched", None)
        assert store.schedules.run_states([tick.run_id or ""]) == {
            "quick-20261120T010000Z": "succeeded"}
    finally:
        store.close()
