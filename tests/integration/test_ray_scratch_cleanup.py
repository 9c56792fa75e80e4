"""A Ray driver's scratch folder does not outlive it (soak finding 7): a driver stopped by
SIGTERM while Ray starts removes its own; one SIGKILLed cannot, and the next cleanup point
(a new scratch folder, the scheduler's pass) removes it, while a live driver's stays."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from seqline.orchestration.processes import tidy_scratch

pytestmark = pytest.mark.integration
# A driver that starts a local Ray through the runner and then waits: the test signals it
# while Ray starts (its session folder exists, the runner is not built yet).
DRIVER = """\
import time
from seqline.orchestration.runners.ray import RayRunner
runner = RayRunner(workers=1)
print("ray started", flush=True)
time.sleep(600)
"""


def _folders(pid: int) -> list[Path]:
    """The driver's scratch folders: /tmp, as Ray's sockets do not fit under a longer TMPDIR."""
    return list(Path("/tmp").glob(f"seqline-ray-{pid}-*"))


def _start_driver(log: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A driver, once Ray is starting in its scratch folder (Ray's session folder made)."""
    with open(log, "wb") as out:  # a file, not a pipe no one reads: Ray may say a lot
        driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=out,
                                  stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not (found := [f for f in _folders(driver.pid) if any(f.glob("session_*"))]):
        assert driver.poll() is None, log.read_text()[-2000:]
        assert time.monotonic() < deadline, "Ray made no session folder in 120 s"
        time.sleep(0.05)
    return driver, found[0]


def _stop_its_ray(folder: Path) -> list[int]:
    """Kill whatever still runs from the folder (Ray's processes name it); their pids."""
    left = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if str(folder) in " ".join(process.info["cmdline"] or []):
                left.append(process.pid)
                process.kill()
    return left


def test_a_ray_driver_stopped_by_sigterm_while_ray_starts_removes_its_folder(tmp_path):
    driver, folder = _start_driver(tmp_path / "driver.log")
    try:
        deadline = time.monotonic() + 120
        while driver.poll() is None and time.monotonic() < deadline:
            # Again every 5 s, as systemd or a user would: a SIGTERM that lands while Ray
            # forks a process runs Ray's handler inside a fork hook, where Python ignores
            # its SystemExit ("Exception ignored in: _releaseLock"), and Ray goes on.
            driver.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                driver.wait(timeout=5)
        assert driver.poll() is not None, "the driver did not stop on SIGTERM in 120 s"
        assert not folder.exists(), f"{folder} outlived its driver: " + \
            (tmp_path / "driver.log").read_text()[-2000:]
    finally:
        driver.kill()
        driver.wait()
        assert _stop_its_ray(folder) == [], "Ray processes outlived their driver"


def test_a_sigkilled_ray_drivers_folder_is_removed_by_the_next_cleanup_point(tmp_path):
    driver, folder = _start_driver(tmp_path / "driver.log")
    try:
        driver.send_signal(signal.SIGKILL)  # nothing in the driver can run
        driver.wait()
        # Out of /tmp at once, under its own name: any seqline process on the machine (a
        # run, a scheduler, CI's) is a cleanup point too, and would remove it first.
        moved = folder.rename(tmp_path / folder.name)
        time.sleep(1)  # Ray's processes die with their driver (parent-death signal)
        _stop_its_ray(folder)
        assert tidy_scratch([tmp_path]) == [moved] and not moved.exists()
    finally:
        driver.kill()
        driver.wait()
        _stop_its_ray(folder)


def test_a_folder_is_its_drivers_while_the_pid_started_before_it_was_written(tmp_path):
    live = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.1)
        # A live driver's folder, written since it started: kept.
        kept = tmp_path / f"seqline-workers-{live.pid}-a1b2c3d4"
        kept.mkdir()
        # The same pid on a folder last written 10 minutes before that process started:
        # its driver is dead and the pid was reused.
        reused = tmp_path / f"seqline-ray-{live.pid}-e5f6g7h8"
        reused.mkdir()
        os.utime(reused, (time.time() - 600, time.time() - 600))
        other = tmp_path / "seqline-notes-1-kept"  # not a name scratch_dir makes
        other.mkdir()
        assert tidy_scratch([tmp_path]) == [reused]
        assert kept.exists() and other.exists()
    finally:
        live.kill()
        live.wait()
