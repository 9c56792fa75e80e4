"""Soak finding 8: on a full disk, a run (a `--resume` too) ended in a Python traceback, not
seqline's one line, and so said nothing at all: the traceback went to a log on that disk, and
the launcher's pipe (finding 3) was told only by the CLI's own failures. Now a full disk under
the run's own records, under its folder or under a local Ray is one line on stderr and on the
pipe, exit 1; anything else left uncaught tells the pipe its line before its traceback.

Each test runs real `seqline` processes on a real tmpfs filled up (tests/disks.py), with a
launcher's pipe as the scheduler gives one (SEQLINE_LAST_WORDS_FD)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from seqline.orchestration.environment import LAST_WORDS_FD
from seqline.orchestration.store import RunStore
from tests.disks import fill, held_open, small_filesystem
from tests.scheduling import quick_project

pytestmark = pytest.mark.e2e
EXE = str(Path(sys.executable).parent / "seqline")


@dataclass(frozen=True)
class Said:
    """How a process ended: its exit code, its stderr, and what it told its launcher."""

    code: int
    stderr: str
    told: str


def run_launched(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> Said:
    """`command` with a launcher's pipe, as the scheduler starts a run."""
    read, write = os.pipe()
    os.set_blocking(read, False)  # a process the run left (Ray's) may hold the write end
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300,
                              pass_fds=(write,),
                              env={**os.environ, **(env or {}), LAST_WORDS_FD: str(write)})
    finally:
        os.close(write)
    chunks = []
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
    os.close(read)
    return Said(done.returncode, done.stderr, b"".join(chunks).decode().strip())


@pytest.fixture
def full_disk(tmp_path) -> Iterator[Path]:
    """A tmpfs of its own with the run's root made on it, then filled to its last byte."""
    with small_filesystem(tmp_path / "full", "256k") as mount:
        (mount / "root").mkdir()
        fill(mount)
        yield mount


def test_a_run_on_a_full_disk_says_one_line_as_does_its_resume_which_then_finishes_it(
        tmp_path, full_disk):
    """The soak's case: run.json cannot be written (the store, elsewhere, can); the run and
    every resume of it while the disk stays full end in one line naming the path, and the
    resume once there is room finishes the run."""
    quick_project(tmp_path)
    run = [EXE, "run", "quick.yaml", "--root", str(full_disk / "root"), "--store",
           f"sqlite:///{tmp_path / 'runs.db'}", "--run-id", "r1", "--workers", "1"]
    for command in (run, [*run, "--resume"]):
        said = run_launched(command, tmp_path)
        line = said.stderr.strip()
        assert (said.code, "\n" in line) == (1, False), said.stderr[-3000:]
        assert re.fullmatch(
            rf"Run failed: the disk is full: writing {full_disk}/root/runs/r1/\.run\.json\."
            rf"tmp-\d+ failed \(No space left on device; 0 KiB free of 256 KiB there\)\. Free "
            rf"space on that filesystem or give a --root on a larger one, then finish the run "
            rf"with `seqline run {tmp_path}/quick\.yaml --root {full_disk}/root --store "
            rf"sqlite:///{tmp_path}/runs\.db --runner local --workers 1 --resume --run-id r1`: "
            r"committed stages are kept\.", line), line  # the run's own command, not a pattern
        assert said.told == line
        with RunStore.open(tmp_path, f"sqlite:///{tmp_path / 'runs.db'}") as store:
            run_error = store.show_run("r1")["error"]["message"]  # `runs show`, its page
        assert run_error == line.removeprefix("Run failed: ")
    (full_disk / "filler").unlink()
    said = run_launched([*run, "--resume"], tmp_path)
    assert said.code == 0, said.stderr[-3000:]
    assert json.loads((full_disk / "root/runs/r1/run.json").read_text())["status"] == \
        "succeeded"


def test_a_run_folder_on_a_disk_out_of_inodes_is_one_line_and_debug_still_tells_the_launcher(
        tmp_path):
    """A full disk where no write of seqline's expects it (the run's folder cannot be made:
    no inode left) is said in the storage's words too; under --debug the traceback is
    printed, and the launcher still hears the line."""
    quick_project(tmp_path)
    with small_filesystem(tmp_path / "few", "1m,nr_inodes=8") as mount:  # (-o size=…,…)
        (mount / "root").mkdir()
        with contextlib.suppress(OSError):
            for i in range(100):
                (mount / f"inode-{i}").touch()
        run = ["run", "quick.yaml", "--root", str(mount / "root"), "--store",
               f"sqlite:///{tmp_path / 'runs.db'}", "--workers", "1"]
        said = run_launched([EXE, *run, "--run-id", "r1"], tmp_path)
        line = said.stderr.strip()
        assert (said.code, "\n" in line) == (1, False), said.stderr[-3000:]
        assert line.startswith(f"error: the disk is full: writing {mount}/root/runs failed "
                               "(No space left on device; "), line
        assert said.told == line
        said = run_launched([EXE, "--debug", *run, "--run-id", "r2"], tmp_path)
        assert said.code == 1 and "Traceback (most recent call last)" in said.stderr
        assert said.told == (f"error: uncaught OSError: [Errno 28] No space left on "
                             f"device: '{mount}/root/runs' (its traceback went to stderr)"), \
            said.told


def test_an_uncaught_exception_tells_the_launcher_its_line_before_its_traceback(tmp_path):
    """Whatever seqline does not catch (a bug) still reaches the launcher: its traceback goes
    to stderr, which may be a log on a full disk."""
    said = run_launched([sys.executable, "-c", (
        "from seqline.orchestration.environment import take_launcher_pipe\n"
        "take_launcher_pipe()\n"
        "raise RuntimeError('a bug,\\nover two lines')\n")], tmp_path)
    assert said.code == 1
    assert said.stderr.rstrip().endswith("RuntimeError: a bug,\nover two lines"), said.stderr
    assert said.told == ("error: uncaught RuntimeError: a bug, over two lines (its traceback "
                         "went to stderr)")


# In a mount namespace of its own, /mnt (short enough for Ray's sockets under it: see
# processes.scratch_dir) becomes a 256 KiB tmpfs with one page left: Python's tempfile takes a
# TMPDIR only if it can write a few bytes there, as on a disk whose last KiB remain.
ON_A_FULL_MNT = ("mount -t tmpfs -o size=256k tmpfs /mnt || exit 97; "
                 "dd if=/dev/zero of=/mnt/filler bs=4k 2>/dev/null; "
                 'truncate -s -4096 /mnt/filler && exec "$@"')
NAMESPACE = ["unshare", "--mount", "--propagation", "private", "sh", "-c", ON_A_FULL_MNT, "sh"]


@pytest.mark.skipif(shutil.which("unshare") is None or not Path("/mnt").is_dir(),
                    reason="needs unshare(1) and /mnt")
def test_a_local_ray_that_cannot_start_on_a_full_temp_disk_fails_in_one_line(tmp_path):
    """ray.init's failure (its GCS never wrote its port file) is the run's one line, naming
    the full temp folder; the soak's resumes died there in a traceback."""
    probe = subprocess.run([*NAMESPACE, "true"], capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"no mount namespace with a tmpfs here: {probe.stderr.strip()}")
    quick_project(tmp_path)
    said = run_launched([*NAMESPACE, EXE, "run", "quick.yaml", "--root", "root", "--run-id",
                         "r1", "--runner", "ray", "--workers", "1"], tmp_path,
                        # Ray's own bound on that wait (30 s by default), for a shorter test
                        env={"TMPDIR": "/mnt", "RAY_gcs_server_port_wait_time_s": "3"})
    line = said.stderr.strip()
    assert (said.code, "\n" in line) == (1, False), said.stderr[-3000:]
    assert re.fullmatch(
        r"Run failed: Ray did not start: .*; its temp folder /mnt/seqline-ray-\d+-\w+ has 0 "
        r"MiB free: free space there or set TMPDIR to a folder with room, then finish the run "
        r"with `seqline run \S+/quick\.yaml --root \S+/root --runner ray --workers 1 --resume "
        r"--run-id r1`\.",
        line), line
    assert said.told == line


def test_a_run_whose_store_is_on_a_full_disk_says_one_line_and_then_runs(tmp_path):
    """Soak finding 10: the store refused the run's first row (its disk full as a scheduled
    run started) and `seqline run` died of SQLAlchemy's OperationalError, a traceback; the tick
    was failed with it. Now one line, exit 1, told to the launcher; nothing ran, and the same
    command runs once the disk has room."""
    quick_project(tmp_path)
    with small_filesystem(tmp_path / "disk", "2m") as mount:
        with RunStore.open(mount / "root"):
            pass  # the store made, as a scheduler's or an earlier run's
        run = [EXE, "run", "quick.yaml", "--root", str(mount / "root"), "--run-id", "r1",
               "--workers", "1"]
        with held_open(mount / "root" / "seqline.db"):
            filler = fill(mount)
            said = run_launched(run, tmp_path)
            assert said.code == 1, said.stderr
            lines = said.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in said.stderr, said.stderr
            assert re.fullmatch(r"Run failed: the run store at sqlite:///\S+ could not record run "
                                r"r1's start \(database or disk is full\)\. Free space on its "
                                r"disk \(or start its database\), then run the same command "
                                r"again \(nothing has run\)\.", lines[0]), lines[0]
            assert said.told == lines[0]
            assert not (mount / "root" / "runs" / "r1").exists()  # nothing ran
            filler.unlink()
        done = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr


def test_a_command_whose_output_has_no_room_says_so_and_names_where_it_goes(tmp_path):
    """`seqline … > /dev/full`, or output into a file on a full disk: one line naming where
    the output goes, exit 120 (CPython's own for an output it could not write), not a full
    disk blamed on the folder the command ran in with a hint to resume a run."""
    with RunStore.open(tmp_path / "root"):
        pass  # a store with no runs: `runs list` prints its empty table
    command = [EXE, "runs", "list", "--root", str(tmp_path / "root")]
    with open("/dev/full", "w") as nowhere:
        done = subprocess.run(command, cwd=tmp_path, stdout=nowhere, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert done.returncode == 120, done.stderr
    assert done.stderr == ("error: the output cannot be written: /dev/full is full (No space "
                           "left on device). Send it elsewhere, or free space there.\n")
    with small_filesystem(tmp_path / "disk", "1m") as mount:
        filler = fill(mount)
        with open(mount / "out.txt", "w") as out:
            done = subprocess.run([EXE, "--help"], cwd=tmp_path, stdout=out,
                                  stderr=subprocess.PIPE, text=True, timeout=120)
        filler.unlink()
    assert done.returncode == 120, done.stderr
    assert done.stderr.startswith(f"error: the output cannot be written: {mount}/out.txt is "
                                  "full"), done.stderr
