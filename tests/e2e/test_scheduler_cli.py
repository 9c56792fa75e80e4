"""`seqline schedule …`, `seqline scheduler` and `seqline backfill` as a user runs them."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import commands
from tests.commands import EXE
from tests.scheduling import quick_project

pytestmark = pytest.mark.e2e
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$")


@pytest.fixture
def folder(tmp_path):
    quick_project(tmp_path)
    return tmp_path


def _seqline(folder: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return commands.seqline(*args, "--root", str(folder / "root"), cwd=folder, timeout=timeout)


def _json(folder: Path, *args: str):
    done = _seqline(folder, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_schedule_add_list_show_pause_resume_remove(folder):
    added = _seqline(folder, "schedule", "add", "nightly", "quick.yaml", "--cron", "30 2 * * *",
                     "--tz", "Europe/Berlin", "--overlap", "queue")
    assert added.returncode == 0, added.stderr
    assert "At 02:30 every day (Europe/Berlin)" in added.stdout
    [listed] = _json(folder, "schedule", "list")
    assert {"name", "pipeline", "cron", "tz", "paused", "next_fire"} <= set(listed)
    assert (listed["name"], listed["cron"], listed["tz"], listed["paused"]) == (
        "nightly", "30 2 * * *", "Europe/Berlin", False)
    assert listed["pipeline"] == str((folder / "quick.yaml").resolve())
    shown = _json(folder, "schedule", "show", "nightly", "--next", "3")
    assert {"name", "cron", "tz", "paused", "next", "ticks"} <= set(shown)
    assert len(shown["next"]) == 3 and all(ISO_UTC.match(t) for t in shown["next"])
    assert {t[11:16] for t in shown["next"]} == {"01:30"}  # 02:30 CET, in UTC
    assert shown["ticks"] == [] and shown["next"][0] == listed["next_fire"]
    assert _seqline(folder, "schedule", "pause", "nightly").returncode == 0
    assert _json(folder, "schedule", "list")[0]["paused"] is True
    assert _seqline(folder, "schedule", "resume", "nightly").returncode == 0
    assert _json(folder, "schedule", "list")[0]["paused"] is False
    removed = _seqline(folder, "schedule", "remove", "nightly")
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert _json(folder, "schedule", "list") == []


@pytest.mark.parametrize(("args", "message"), [
    (["add", "a", "quick.yaml", "--cron", "61 * * * *"], r"cron expression '61 \* \* \* \*': "
                                                         r"bad minute"),
    (["add", "a", "quick.yaml", "--cron", "* * *"], r"has 3 field\(s\); give 5"),
    (["add", "a", "quick.yaml", "--cron", "@daily", "--tz", "Europe/Berln"],
     r"unknown time zone 'Europe/Berln' \(--tz\); did you mean 'Europe/Berlin'\?"),
    (["add", "a", "quick.yaml", "--cron", "@daily", "--start", "tomorrow"],
     r"--start 'tomorrow' is not an ISO-8601 time"),
    (["add", "a", "missing.yaml", "--cron", "@daily"], r"pipeline file missing.yaml not found"),
    (["add", "a b", "quick.yaml", "--cron", "@daily"], r"schedule name 'a b' is not a name; "
                                                       r"use letters"),
    (["add", "a", "quick.yaml", "--cron", "0 0 30 2 *"], r"never fires: day 30 never occurs "
                                                         r"in month 2"),
    (["show", "nigthly"], r"no schedule named 'nigthly' in the run store\. Did you mean "
                          r"'nightly'\?"),
    (["pause", "other"], r"no schedule named 'other'"),
    (["add", "nightly", "quick.yaml", "--cron", "@daily"], r"'nightly' already exists"),
])
def test_schedule_bad_input_exits_2_with_one_line(folder, args, message):
    assert _seqline(folder, "schedule", "add", "nightly", "quick.yaml", "--cron",
                    "0 3 * * *").returncode == 0
    done = _seqline(folder, "schedule", *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and re.search(message, done.stderr), \
        done.stderr



@contextlib.contextmanager
def _killed_at_the_end(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """A daemon the test stops itself, killed if the test failed before it did."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()

def _start_scheduler(folder: Path) -> subprocess.Popen:
    return subprocess.Popen([EXE, "scheduler", "--root", str(folder / "root")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=folder)


def _wait_for_line(stream, pattern: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if re.search(pattern, line):
            return line
    raise AssertionError(f"no line matching {pattern!r} in {timeout} s")


def test_scheduler_is_one_per_store_and_stops_on_sigterm(folder):
    assert _seqline(folder, "schedule", "add", "hourly", "quick.yaml", "--cron",
                    "0 * * * *").returncode == 0
    first = _start_scheduler(folder)
    try:
        _wait_for_line(first.stderr, r"scheduler started on .* 1 active schedule")
        second = _seqline(folder, "scheduler", timeout=60)
        assert second.returncode == 2
        assert re.search(rf"host {re.escape(socket.gethostname())}, PID {first.pid}\b",
                         second.stderr), second.stderr
        sent = time.monotonic()
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=10) == 0
        assert time.monotonic() - sent < 5
        assert "scheduler stopped (SIGTERM)" in first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
    # the lease was released: the next one starts at once
    with _killed_at_the_end(_start_scheduler(folder)) as third:
        _wait_for_line(third.stderr, r"scheduler started")
        third.send_signal(signal.SIGINT)
        assert third.wait(timeout=10) == 0


@pytest.mark.parametrize("root", ["nope", "empty"])
def test_scheduler_on_a_root_without_a_store_exits_2_and_creates_nothing(folder, root):
    """It idled forever on a store of its own, "0 active schedule(s)", where `schedule
    list` says there is no run store."""
    (folder / "empty").mkdir()
    done = commands.seqline("scheduler", "--root", root, cwd=folder, timeout=60)
    listed = commands.seqline("schedule", "list", "--root", root, cwd=folder, timeout=60)
    assert (done.returncode, listed.returncode) == (2, 2), done.stderr
    assert done.stderr == (
        f"error: no run store at {root}/seqline.db, so no schedules; add one with `seqline "
        f"schedule add NAME PIPELINE --cron CRON --root {root}`, or pass the --root (or "
        "--store) where the schedules are\n")
    assert listed.stderr.startswith(f"error: no run store at {root}/seqline.db; ")
    assert not (folder / root / "seqline.db").exists() and not (folder / "nope").exists()


def test_scheduler_given_a_store_url_makes_its_tables(folder):
    """An explicit --store (a PostgreSQL server's empty database, here SQLite) is the
    operator's: the scheduler starts on it as before."""
    url = f"sqlite:///{folder / 'own.db'}"
    with _killed_at_the_end(subprocess.Popen(
            [EXE, "scheduler", "--root", str(folder / "root"), "--store", url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder)) as daemon:
        _wait_for_line(daemon.stderr, r"scheduler started on .* 0 active schedule")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=10) == 0


def test_backfill_runs_each_fire_time_with_trigger_backfill(folder):
    assert _seqline(folder, "schedule", "add", "daily", "quick.yaml", "--cron", "0 3 * * *",
                    "--tz", "America/New_York", "--workers", "1").returncode == 0
    outcome = _json(folder, "backfill", "daily", "--from", "2026-11-01", "--to",
                    "2026-11-02T12:00", "--max-active", "2")
    assert [(o["fire_time"], o["run_id"], o["run_status"]) for o in outcome] == [
        ("2026-11-01T08:00:00+00:00", "daily-backfill-20261101T080000Z", "succeeded"),
        ("2026-11-02T08:00:00+00:00", "daily-backfill-20261102T080000Z", "succeeded")]
    runs = _json(folder, "runs", "list")
    assert {(r["run_id"], r["trigger"]) for r in runs} == {
        ("daily-backfill-20261101T080000Z", "backfill"),
        ("daily-backfill-20261102T080000Z", "backfill")}
    ticks = _json(folder, "schedule", "show", "daily")["ticks"]
    assert [t["trigger"] for t in ticks] == ["backfill", "backfill"]
    assert ticks[0]["fire_time"] == "2026-11-02T08:00:00+00:00"  # newest first
    again = _json(folder, "backfill", "daily", "--from", "2026-11-01", "--to", "2026-11-02")
    assert [o["run_status"] for o in again] == ["succeeded"]  # nothing new launched
    assert len(_json(folder, "runs", "list")) == 2


def test_backfill_on_a_full_store_stops_in_one_line_and_finishes_when_run_again(folder):
    """The soak's finding: a store that cannot record a tick (SQLite's own words, from a
    trigger: a disk cannot be filled at one exact write) stopped backfill with a traceback."""
    assert _seqline(folder, "schedule", "add", "daily", "quick.yaml", "--cron", "0 3 * * *",
                    "--workers", "1").returncode == 0
    database = folder / "root" / "seqline.db"
    assert database.exists()
    with sqlite3.connect(database) as db:
        db.execute("CREATE TRIGGER full BEFORE INSERT ON ticks "
                   "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    day = ("--from", "2026-11-01", "--to", "2026-11-01T12:00")
    done = _seqline(folder, "backfill", "daily", *day)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: backfill stopped: the run store of --root " + str(folder / "root")
        + " could not record a tick (database or disk is full); launched runs go on; run the "
        "same command again to launch the rest.")
    with sqlite3.connect(database) as db:
        db.execute("DROP TRIGGER full")
    outcome = _json(folder, "backfill", "daily", *day)
    assert [o["run_status"] for o in outcome] == ["succeeded"]


def test_export_prints_a_dag_with_the_schedules_cron_zone_and_policies(folder):
    assert _seqline(folder, "schedule", "add", "nightly", "quick.yaml", "--cron", "30 2 * * *",
                    "--tz", "Europe/Berlin", "--catchup", "all").returncode == 0
    done = _seqline(folder, "schedule", "export", "nightly", "--to", "airflow")
    assert done.returncode == 0, done.stderr
    dag = done.stdout
    compile(dag, "seqline_nightly.py", "exec")
    for expected in ["schedule='30 2 * * *'", "tz='Europe/Berlin'", "catchup=True",
                     "max_active_runs=1", "--trigger schedule", "dag_id='seqline_nightly'",
                     str((folder / "quick.yaml").resolve())]:
        assert expected in dag, expected
    assert os.path.isabs(re.search(r"--root (\S+)", dag).group(1))
