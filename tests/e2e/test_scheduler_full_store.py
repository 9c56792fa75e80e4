"""`seqline scheduler` and `seqline schedule …` on a run store whose disk is full (soak
finding 9): the scheduler waits for the store, the commands end in one line."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from seqline.orchestration.schedule.daemon import Scheduler
from seqline.orchestration.schedule.spec import new_schedule
from seqline.orchestration.store import RunStore
from seqline.orchestration.store.rows import now
from tests.disks import fill, held_open, small_filesystem
from tests.scheduling import quick_project

pytestmark = pytest.mark.e2e
EXE = str(Path(sys.executable).parent / "seqline")


@pytest.fixture
def disk(tmp_path) -> Iterator[Path]:
    """A 2 MiB tmpfs holding the artifact root and its store, with one schedule in it that
    does not fire during a test (the yearly fire time is hours away)."""
    quick_project(tmp_path)
    with small_filesystem(tmp_path / "disk", "2m") as mount:
        with RunStore.open(mount / "root") as store:
            schedule, _ = new_schedule("yearly", tmp_path / "quick.yaml", "0 0 1 1 *",
                                        at=now())
            store.schedules.add_schedule(schedule)
        yield mount


def _start(tmp_path: Path, disk: Path) -> subprocess.Popen:
    return subprocess.Popen([EXE, "scheduler", "--root", str(disk / "root")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)


def _line(process: subprocess.Popen, pattern: str, timeout: float = 60) -> str:
    """The scheduler's next stderr line matching `pattern`; it must still be running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stderr.readline()  # type: ignore[union-attr]
        assert "Traceback" not in line, line + process.stderr.read()  # type: ignore[union-attr]
        if re.search(pattern, line):
            return line
        if not line and process.poll() is not None:
            raise AssertionError(f"the scheduler exited {process.returncode} before a line "
                                 f"matching {pattern!r}")
    raise AssertionError(f"no line matching {pattern!r} in {timeout} s")


def _stop(process: subprocess.Popen) -> str:
    """SIGTERM; the scheduler must exit 0 within seconds. Returns the rest of its stderr."""
    process.send_signal(signal.SIGTERM)
    try:
        assert process.wait(timeout=15) == 0
        return process.stderr.read()  # type: ignore[union-attr]
    finally:
        if process.poll() is None:
            process.kill()


def test_a_scheduler_restarted_on_a_full_store_waits_for_its_lease_then_starts(
        tmp_path, disk):
    """The finding: taking the lease raised "database or disk is full" as a traceback, exit 1
    (under systemd, a restart for nothing, and no scheduler once its start limit is hit)."""
    with held_open(disk / "root" / "seqline.db"):
        filler = fill(disk)
        scheduler = _start(tmp_path, disk)
        try:
            said = _line(scheduler, r"lease")
            assert re.fullmatch(
                r"\S+ the run store at sqlite:///\S+/root/seqline\.db failed to give this "
                r"scheduler its lease \(database or disk is full\); trying again in 1 s\n",
                said), said
            _line(scheduler, r"lease .*trying again in 2 s")  # backing off, still running
            filler.unlink()
            _line(scheduler, r"scheduler started on .* 1 active schedule")
            rest = _stop(scheduler)
        finally:
            if scheduler.poll() is None:
                scheduler.kill()
    assert "scheduler stopped (SIGTERM)" in rest and "Traceback" not in rest, rest


def test_a_scheduler_whose_store_cannot_open_on_a_full_disk_waits_and_stops_on_sigterm(
        tmp_path, disk):
    """With no process holding the store, SQLite cannot even make its -shm file: the open
    fails ("disk I/O error"), and was one line saying to check --store, exit 2."""
    fill(disk)
    scheduler = _start(tmp_path, disk)
    try:
        said = _line(scheduler, r"run store")
        assert re.fullmatch(
            r"\S+ the run store at sqlite:///\S+/root/seqline\.db failed to open \(disk I/O "
            r"error: its disk is full or failing\); trying again in 1 s\n", said), said
        sent = time.monotonic()
        rest = _stop(scheduler)
        assert time.monotonic() - sent < 5
    finally:
        if scheduler.poll() is None:
            scheduler.kill()
    assert re.fullmatch(r"(\S+ the run store .* trying again in \d+ s\n)*"
                        r"\S+ scheduler stopped \(SIGTERM\) before its run store opened\n",
                        rest), rest


@pytest.mark.parametrize("args", [
    ["add", "nightly", "quick.yaml", "--cron", "@daily"],
    ["pause", "yearly"],
    ["resume", "yearly"],
    ["remove", "yearly"],
])
def test_schedule_commands_on_a_full_store_end_in_one_line_then_work_once_it_has_room(
        tmp_path, disk, args):
    """Each raised "database or disk is full" as a traceback, exit 1."""
    with held_open(disk / "root" / "seqline.db"):
        filler = fill(disk)
        command = [EXE, "schedule", *args, "--root", str(disk / "root")]
        done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path,
                              timeout=120)
        assert done.returncode == 1, done.stderr
        assert re.fullmatch(
            r"error: the run store at sqlite:///\S+/root/seqline\.db failed \(database or disk "
            r"is full\); free space on its disk \(or start its database\), then run the same "
            r"command again\.\n", done.stderr), done.stderr
        filler.unlink()
        again = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path,
                               timeout=120)
        assert again.returncode == 0, again.stderr


def test_a_scheduler_stopping_on_a_full_store_leaves_its_lease_in_one_line(disk):
    """Giving the lease up is a write too: it raised out of `run`'s `finally` as a traceback;
    the lease is left to expire (at once for a successor on this host: its pid is gone)."""
    lines: list[str] = []
    with RunStore.open(disk / "root") as store:
        scheduler = Scheduler(store, launcher=None, log=lines.append)  # type: ignore[arg-type]
        scheduler.acquire()
        with held_open(disk / "root" / "seqline.db"):
            filler = fill(disk)
            scheduler.release()
            assert lines == [f"the run store at {store.url} failed to take back this "
                             "scheduler's lease (database or disk is full); it expires in 30 s, "
                             "at once for a successor on this host"]
            filler.unlink()
