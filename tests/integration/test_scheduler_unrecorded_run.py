"""A tick whose run's process dies before recording the run (found by benchmarks/soak.py: a full
disk as a scheduled run started) fails with the exit code and the run's one-line error,
instead of claiming a run that does not exist."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from seqline.orchestration.schedule.daemon import Scheduler
from seqline.orchestration.schedule.launch import ProcessLauncher
from seqline.orchestration.schedule.spec import new_schedule
from seqline.orchestration.store import RunStore
from tests.disks import small_filesystem
from tests.scheduling import Clock, quick_project

pytestmark = pytest.mark.integration
T0 = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)


def _reap_all(scheduler: Scheduler, launcher: ProcessLauncher, timeout: float = 60) -> None:
    """Until the launched runs have ended and the scheduler has collected them."""
    deadline = time.monotonic() + timeout
    while launcher.children and time.monotonic() < deadline:
        scheduler.reap()
        time.sleep(0.05)


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
        _reap_all(scheduler, launcher)
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
        _reap_all(scheduler, launcher, timeout=120)
        [tick] = store.schedules.ticks_of("quick")
        assert (tick.status, tick.reason) == ("launched", None)
        assert store.schedules.run_states([tick.run_id or ""]) == {
            "quick-20261120T010000Z": "succeeded"}
    finally:
        store.close()


@pytest.fixture
def full_disk(tmp_path) -> Iterator[Path]:
    """A tmpfs of its own, filled to its last byte (as the soak's disk_full fault leaves it)."""
    with small_filesystem(tmp_path / "full", "256k") as mount:
        with contextlib.suppress(OSError), open(mount / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        yield mount


def test_a_run_whose_log_is_on_a_full_disk_still_tells_the_scheduler_its_error(
        tmp_path, full_disk):
    """Soak finding 3: the run's log is on the disk whose filling ended it, so the log holds
    nothing; the run says its one-line error on a pipe to the scheduler too, and the
    scheduler's own log (journald's, say) and the tick's reason carry it."""
    quick_project(tmp_path)
    store = RunStore.open(tmp_path / "root")
    try:
        schedule, _ = new_schedule("quick", tmp_path / "quick.yaml", "0 * * * *", at=T0)
        store.schedules.add_schedule(schedule)
        (tmp_path / "in.csv").unlink()  # the run will stop on its missing input, exit 2
        launcher = ProcessLauncher(tmp_path / "root", None, full_disk)
        lines: list[str] = []
        scheduler = Scheduler(store, launcher, clock=Clock(T0 + timedelta(hours=1, seconds=1)),
                              log=lines.append)
        scheduler.acquire()
        scheduler.tick_once()
        _reap_all(scheduler, launcher)
        assert (full_disk / "quick-20261120T010000Z.log").read_bytes() == b""  # nothing fit
        said = next(line for line in lines if "ended with exit code" in line)
        assert re.fullmatch(r"run quick-20261120T010000Z ended with exit code 2: error: .*"
                            r"in\.csv.*", said), said
        [tick] = store.schedules.ticks_of("quick")
        assert tick.status == "failed"
        assert tick.reason == ("its run process exited with code 2 before recording run "
                               "quick-20261120T010000Z in the run store: "
                               + said.split(": ", 1)[1])
        # the error once in the scheduler's log: the tick's line refers to the one before
        assert sum(said.split(": ", 1)[1] in line for line in lines) == 1, lines
        assert lines[lines.index(said) + 1] == (
            "quick: tick 2026-11-20T01:00:00+00:00 failed: its run process exited with code 2 "
            "before recording run quick-20261120T010000Z in the run store")
    finally:
        store.close()
