"""Click's usage errors through the real console script: one line in seqline's voice, exit 2;
a Ctrl-C as it starts: exit 130."""

from __future__ import annotations

import re
import signal
import subprocess
import time

import pytest

from tests import commands

pytestmark = pytest.mark.e2e


CASES = [
    (["run", "x.yaml", "--runner", "nosuch"],
     r"^error: invalid --runner: 'nosuch' is not one of 'local', 'beam', 'ray'; "
     r"see `seqline run --help`$"),
    (["runs", "shw"], r"^error: no such command 'shw'.*; see `seqline runs --help`$"),
    (["run"], r"^error: missing argument .*; see `seqline run --help`$"),
    (["run", "x.yaml", "--workers", "zero"], r"^error: invalid --workers: .*; see "),
    (["verify", "x", "--nosuch"], r"^error: no such option.*--nosuch.*; see "),
]


@pytest.mark.parametrize(("args", "line"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_usage_error_is_one_line_exit_2(tmp_path, args, line):
    done = commands.seqline(*args, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(line, lines[0]), done.stderr
    assert "Value error" not in done.stderr and list(tmp_path.iterdir()) == []


def test_no_command_prints_the_help():
    done = commands.seqline(timeout=120)
    assert "Usage: seqline" in done.stderr and "Commands" in done.stderr  # (as click does)


def test_ctrl_c_at_any_moment_of_a_command_exits_130_without_a_traceback(tmp_path):
    """A Ctrl-C in a command's first fraction of a second lands in its imports, before the
    app (which Typer makes exit 130) has taken over: it ends the same way, not in a
    traceback. Each delay is a Ctrl-C at another point of the start-up. (One that lands in
    Python's own start, before the console script calls seqline, is Python's to say.)"""
    args = [commands.EXE, "runs", "list", "--root", str(tmp_path)]
    whole = subprocess.run(args, capture_output=True, text=True, timeout=60).returncode
    codes = []
    for delay in (0.05, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5):
        command = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True)
        time.sleep(delay)
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=60)
        assert ", in main_command" not in err, (delay, err)  # no traceback through its frames
        if "Traceback" not in err and "Fatal Python error" not in err:
            codes.append(command.returncode)
    assert set(codes) <= {130, whole} and 130 in codes, codes
