"""What `seqline backfill` says it did: each failed run's stored error and the command that
resumes it, "nothing left to run" when run again, tick tables that keep the fire time at 80
columns (the newcomer's walk through a backfill of a failing pipeline)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests import commands
from tests.e2e.test_terminal_tables import _headers, _on_a_terminal, _table_lines
from tests.scheduling import quick_project

pytestmark = pytest.mark.e2e

RANGE = ("--from", "2026-11-28T00:00", "--to", "2026-11-29T12:00")
RUN_IDS = ["nightly-backfill-20261128T000000Z", "nightly-backfill-20261129T000000Z"]


def _seqline(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return commands.seqline(*args, "--root", "root", cwd=folder, timeout=300)


@pytest.fixture(scope="module")
def failed(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A schedule `nightly` whose pipeline fails (a word in a column of numbers), backfilled
    over two fire times: the folder and the backfill's output."""
    folder = quick_project(tmp_path_factory.mktemp("badnight"))
    (folder / "in.csv").write_text("x\n1\n2\nthree\n4\n")
    added = _seqline(folder, "schedule", "add", "nightly", "quick.yaml", "--cron", "0 0 * * *")
    assert added.returncode == 0, added.stderr
    return folder, _seqline(folder, "backfill", "nightly", *RANGE)


def _stored(folder: Path, run_id: str) -> tuple[str, str]:
    """The run's error line as the run store keeps it, and `runs show`'s resume command."""
    shown = json.loads(_seqline(folder, "runs", "show", run_id, "--json").stdout)
    text = _seqline(folder, "runs", "show", run_id).stdout
    [resume] = [line.removeprefix("resume: ") for line in text.splitlines()
                if line.startswith("resume: ")]
    return shown["error"]["message"].strip().split("\n")[0], resume


def test_backfill_prints_each_failed_runs_stored_error_and_its_resume_command(failed):
    folder, done = failed
    assert done.returncode == 1, done.stderr
    said = [line for line in done.stderr.splitlines() if not re.match(r"\d{4}-", line)]
    errors, resumes = zip(*(_stored(folder, run_id) for run_id in RUN_IDS), strict=True)
    assert said == [
        f"error: run {RUN_IDS[0]} failed: {errors[0]}",
        f"error: run {RUN_IDS[1]} failed: {errors[1]}",
        "backfill nightly: launched 2 of 2 fire time(s); 2 failed. Finish the failed runs "
        "with:",
        f"  {resumes[0]}", f"  {resumes[1]}"], done.stderr
    assert errors[0].startswith("stage 'work' failed on seq 0")
    assert "--resume --run-id " + RUN_IDS[0] in resumes[0]


def test_backfill_again_launches_nothing_and_says_so(failed):
    folder, _ = failed
    again = _seqline(folder, "backfill", "nightly", *RANGE)
    assert again.returncode == 1, again.stderr  # its runs still failed
    assert "backfill of" not in again.stderr and "launched run" not in again.stderr
    assert ("backfill nightly: nothing left to run: 2 of 2 fire time(s) already have runs; "
            "2 failed. Finish the failed runs with:") in again.stderr.splitlines()
    assert all(f"error: run {run_id} failed: " in again.stderr for run_id in RUN_IDS)
    as_json = json.loads(_seqline(folder, "backfill", "nightly", *RANGE, "--json").stdout)
    assert [(r["run_id"], r["run_status"], r["launched_now"]) for r in as_json] == [
        (RUN_IDS[0], "failed", False), (RUN_IDS[1], "failed", False)]
    assert len(json.loads(_seqline(folder, "runs", "list", "--json").stdout)) == 2


@pytest.mark.parametrize("command", [["backfill", "nightly", *RANGE],
                                     ["schedule", "show", "nightly"]])
def test_backfill_and_schedule_show_keep_the_fire_time_at_80_columns(failed, command):
    folder, _ = failed
    text = _on_a_terminal(folder, 80, *command, status=1 if command[0] == "backfill" else 0)
    ticks = [h for h in _headers(text) if "run" in h]
    assert len(ticks) == 1 and ticks[0][:1] == ["fire time (UTC)"], text
    assert {"run", "run status"} <= set(ticks[0]), text
    assert all(len(line) <= 80 for line in _table_lines(text)), text
    for day, run_id in zip(("28", "29"), RUN_IDS, strict=True):  # to the minute, whole
        assert re.search(rf"│ 2026-11-{day} 00:00 │ (launched │ )?{run_id} │ failed +│", text), text
    if command[0] == "schedule":
        assert re.search(r"^paused +no$", text, re.M), text
        assert "--wide adds: trigger" in text
    piped = _seqline(folder, *command).stdout  # a pipe: every column
    assert "2026-11-28 00:00 " in piped and "2026-11-28 00:00:00" not in piped


def test_backfill_again_launches_a_fire_time_whose_launch_failed(tmp_path):
    folder = quick_project(tmp_path)
    assert _seqline(folder, "schedule", "add", "nightly", "quick.yaml", "--cron",
                    "0 0 * * *").returncode == 0
    (folder / "quick.yaml").rename(folder / "away.yaml")
    day = ("--from", "2026-11-28", "--to", "2026-11-28T12:00")
    done = _seqline(folder, "backfill", "nightly", *day)
    assert done.returncode == 1
    assert (f"error: fire time 2026-11-28T00:00:00+00:00: launch failed: the pipeline file "
            f"{folder / 'quick.yaml'} is missing") in done.stderr, done.stderr
    assert ("backfill nightly: launched 0 of 1 fire time(s); 1 failed. Fix the cause, then "
            "run the same backfill again: it launches the fire times left without a run.") \
        in done.stderr.splitlines(), done.stderr
    (folder / "away.yaml").rename(folder / "quick.yaml")
    again = _seqline(folder, "backfill", "nightly", *day)
    assert again.returncode == 0, again.stderr
    assert "backfill nightly: launched 1 of 1 fire time(s); every run succeeded." \
        in again.stdout.splitlines()
    assert "nightly-backfill-20261128T000000Z" in again.stdout
