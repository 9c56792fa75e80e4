"""Click's usage errors through the real console script: one line in seqline's voice, exit 2."""

from __future__ import annotations

import re

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
