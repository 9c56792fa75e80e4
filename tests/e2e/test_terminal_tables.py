"""Tables for a terminal: on a real pseudo-terminal of 80 or 100 columns every table fits,
ids and statuses whole, the less important columns folded away (named under the table, all
back with --wide); in a pipe every column, as before; numbers written one way."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import threading
from pathlib import Path

import pytest

from tests import commands
from tests.commands import EXE
from tests.scheduling import quick_project

pytestmark = pytest.mark.e2e

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LONG_RUN = "nightly-weather-backfill-20261123T020000Z"  # as long as a backfill's ids get
SCHEDULE = "nightly-weather-model"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, list[str]]:
    """A root with two runs (one id generated, one long) and a schedule; their run ids."""
    folder = quick_project(tmp_path_factory.mktemp("tables"))
    for extra in ([], ["--run-id", LONG_RUN]):
        done = _piped(folder, "run", "quick.yaml", "--no-verify", *extra)
        assert done.returncode == 0, done.stderr
    done = _piped(folder, "schedule", "add", SCHEDULE, "quick.yaml", "--cron", "30 2 * * *")
    assert done.returncode == 0, done.stderr
    runs = json.loads(_piped(folder, "runs", "list", "--json").stdout)
    return folder, [r["run_id"] for r in runs]


def _piped(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return commands.seqline(*args, "--root", "root", cwd=folder, timeout=120,
                            env={**os.environ, "COLUMNS": "80"})


def _on_a_terminal(folder: Path, columns: int, *args: str, status: int = 0,
                   root: bool = True) -> str:
    """The command's output on a pseudo-terminal `columns` wide, escape codes removed."""
    leader, follower = pty.openpty()
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")}
    environment.update(COLUMNS=str(columns), LINES="50", TERM="xterm-256color")
    chunks: list[bytes] = []

    def read() -> None:  # concurrently: a full terminal buffer would block the command
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the other end is closed and drained
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    proc = subprocess.run([EXE, *args, *(["--root", "root"] if root else [])], cwd=folder,
                          env=environment,
                          stdin=follower, stdout=follower, stderr=follower, timeout=120)
    os.close(follower)
    reader.join(timeout=30)
    os.close(leader)
    text = ESCAPES.sub("", b"".join(chunks).decode().replace("\r\n", "\n"))
    assert proc.returncode == status, text
    return text


def _headers(text: str) -> list[list[str]]:
    """Each table's column headers, in order."""
    return [[cell.strip() for cell in line.strip("┃").split("┃")]
            for line in text.splitlines() if line.startswith("┃")]


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]


# The columns shown at each width: the policy's snapshot (console.Column priorities, a column
# that says nothing in any row after the others). At 80
# the long run id leaves no room for the start time; the number of seconds fits.
SHOWN = {
    ("runs", "list", 80): [["run", "status", "pipeline", "seconds"]],
    ("runs", "list", 100): [["run", "status", "pipeline", "started (UTC)", "seconds"]],
    ("schedule", "list", 80): [["name", "paused", "next fire (UTC)", "cron", "tz"]],
    ("schedule", "list", 100): [["name", "paused", "next fire (UTC)", "cron", "tz", "runner",
                                 "overlap"]],
    # (the run's stages were reused: their seconds and filtered are 0 in every row, so the
    # run they came from, and then why, come before them)
    ("runs", "show", 80): [["stage", "status", "component", "in", "out", "dead", "cache"]],
    ("runs", "show", 100): [["stage", "status", "component", "in", "out", "cache", "why"]],
}
ALL = {("runs", "list"): ["run", "status", "pipeline", "started (UTC)", "seconds", "runner",
                          "trigger", "finished (UTC)"],
       ("schedule", "list"): ["name", "paused", "next fire (UTC)", "cron", "tz", "runner",
                              "overlap", "catch-up", "pipeline"]}


@pytest.mark.parametrize("columns", [80, 100])
def test_tables_runs_list_fits_with_ids_and_statuses_whole(project, columns):
    folder, run_ids = project
    text = _on_a_terminal(folder, columns, "runs", "list")
    assert _headers(text) == SHOWN["runs", "list", columns]
    assert all(len(line) <= columns for line in _table_lines(text)), text
    assert "…" not in text
    for run_id in run_ids:  # each id whole, on one row with its whole status
        assert re.search(rf"│ {re.escape(run_id)} +│ succeeded │", text), text
    if columns == 80:
        assert "--wide adds: started (UTC), runner, trigger, finished (UTC)" in text


@pytest.mark.parametrize("columns", [80, 100])
def test_tables_runs_show_is_readable(project, columns):
    folder, _ = project
    text = _on_a_terminal(folder, columns, "runs", "show", LONG_RUN)
    assert f"run_id           {LONG_RUN}" in text
    assert _headers(text) == SHOWN["runs", "show", columns]
    assert all(len(line) <= columns for line in _table_lines(text)), text
    assert "…" not in text
    assert not re.search(r"\d\.\d{3,}|e-0\d", text), text  # seconds to 2 places, no 1e-05
    # each stage whole, with its whole status (this run's came from the first run's cache)
    assert re.findall(r"│ (read|work) +│ (\w+) +│", text) == [("read", "cached"),
                                                              ("work", "cached")]


@pytest.mark.parametrize("columns", [80, 100])
def test_tables_schedule_list_and_show_fit(project, columns):
    folder, _ = project
    listed = _on_a_terminal(folder, columns, "schedule", "list")
    assert _headers(listed) == SHOWN["schedule", "list", columns]
    assert re.search(rf"│ {SCHEDULE} │ +│ \d{{4}}-\d\d-\d\d 02:30 │", listed), listed
    shown = _on_a_terminal(folder, columns, "schedule", "show", SCHEDULE)
    for text in (listed, shown):
        assert all(len(line) <= columns for line in _table_lines(text)), text
        assert "…" not in text
    assert "ticks: none yet (the scheduler records one at each fire time)" in shown


@pytest.mark.parametrize(("group", "command"), [("runs", "list"), ("schedule", "list")])
def test_tables_wide_shows_every_column_on_a_terminal(project, group, command):
    folder, _ = project
    text = _on_a_terminal(folder, 80, group, command, "--wide")
    assert _headers(text) == [ALL[group, command]] and "--wide adds" not in text


@pytest.mark.parametrize(("group", "command"), [("runs", "list"), ("schedule", "list")])
def test_tables_piped_output_is_full_width_plain_text(project, group, command):
    folder, _ = project
    done = _piped(folder, group, command)
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout and "--wide" not in done.stdout and "…" not in done.stdout
    assert _headers(done.stdout) == [ALL[group, command]]
    assert max(len(line) for line in _table_lines(done.stdout)) > 80


def test_an_error_on_a_terminal_is_one_line_to_copy(tmp_path):
    """A failed run's error, longer than the terminal is wide: one line (the terminal wraps it
    for the eye; rich's own wrapping put newlines in what a person copies), in `run` and in
    `runs show`, whose error is that line and not the traceback; piped, no line is padded."""
    folder = quick_project(tmp_path)
    (folder / "in.csv").write_text("x\n1\n2\nthree\n4\n")
    text = _on_a_terminal(folder, 80, "run", "quick.yaml", "--run-id", "bad", status=1)
    failed = [line for line in text.splitlines() if line.startswith("Run failed: ")]
    assert len(failed) == 1 and len(failed[0]) > 80, text
    assert failed[0].rstrip().endswith("Run with --debug for the traceback."), text
    shown = _on_a_terminal(folder, 80, "runs", "show", "bad")
    error = [line.split(None, 1)[1].strip() for line in shown.splitlines()
             if line.startswith("error ")]
    assert len(error) == 1 and error[0].startswith("stage 'work' failed on seq 0"), shown
    assert error[0].rstrip(".") in failed[0], (error, failed)
    assert "Traceback" not in shown
    piped = _piped(folder, "runs", "show", "bad")
    assert piped.returncode == 0 and "Traceback" not in piped.stdout
    assert not [line for line in piped.stdout.splitlines() if line != line.rstrip()]


def test_tables_lookup_fits_with_its_places_wrapped(project):
    """`lookup`'s places are prose (a path and a line, a shard and an offset): wrapped at
    words within the terminal, not lines of ~160 columns the terminal breaks for it."""
    folder, _ = project
    text = _on_a_terminal(folder, 80, "lookup", LONG_RUN, "5")
    lines = _table_lines(text)
    assert lines and all(len(line) <= 80 for line in lines), text
    assert "…" not in text and "in.csv" in text
    piped = _piped(folder, "lookup", LONG_RUN, "5")
    assert any("in.csv, line 7 (record 5 of the file)" in line
               for line in piped.stdout.splitlines()), piped.stdout


# Every command's help; rich's help table cuts a word wider than its column with "…".
HELPS = [[], ["run"], ["verify"], ["lookup"], ["runs", "list"], ["runs", "show"],
         ["runs", "logs"], ["schedule", "add"], ["schedule", "show"], ["schedule", "export"],
         ["scheduler"], ["backfill"], ["dashboard"], ["store", "rebuild"], ["schema"]]


def test_help_at_80_columns_cuts_no_word(tmp_path):
    cut = []
    for command in HELPS:
        text = _on_a_terminal(tmp_path, 80, *command, "--help", root=False)
        cut += [f"{' '.join(command)}: {line.strip()}" for line in text.splitlines()
                if re.search(r"[\w/:.+-]…", line)]  # (the dashboard's `?token=…` is text)
    assert cut == []
