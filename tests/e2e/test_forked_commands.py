"""tests/commands.py's forked `seqline` answers as the console script does: the same stdout,
stderr and exit status for the same command, folder and environment; a timeout kills it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import commands
from tests.scheduling import quick_project

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    folder = quick_project(tmp_path_factory.mktemp("forked"))
    done = commands.seqline("run", "quick.yaml", "--root", "root", "--run-id", "r1",
                            "--no-verify", cwd=folder)
    assert done.returncode == 0, done.stderr
    # a function the console script cannot import (the tests' package is not on its path)
    (folder / "elsewhere.yaml").write_text(
        "name: p\nstages:\n  - {name: f, component: preprocess, params: "
        "{fn: 'tests.commands:seqline'}}\n")
    return folder


CASES = [
    ["--help"],
    ["runs", "list", "--root", "root", "--json"],
    ["runs", "show", "r1", "--root", "root"],
    ["runs", "show", "nope", "--root", "root"],  # exit 2, one line
    ["runs", "list", "--root", "nowhere"],  # exit 2: no store, and none made
    ["run", "missing.yaml", "--root", "root"],  # exit 2 before anything runs
    ["run", "elsewhere.yaml", "--root", "root"],  # exit 2: no such module on its path
    ["verify", "r1", "--root", "root", "--json"],
    ["frobnicate"],  # a usage error
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a[:3]) for a in CASES])
def test_a_forked_command_answers_as_the_console_script(project, args):
    env = {**os.environ, "COLUMNS": "80", "SEQLINE_ROOT": "root"}
    real = subprocess.run([str(commands.EXE), *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)
    forked = commands.seqline(*args, cwd=project, env=env, timeout=120)
    assert (forked.returncode, forked.stdout, forked.stderr) == \
        (real.returncode, real.stdout, real.stderr)
    assert forked.args == real.args


def test_a_forked_command_past_its_timeout_is_killed(project):
    with pytest.raises(subprocess.TimeoutExpired):
        commands.seqline("run", "quick.yaml", "--root", "root", cwd=project, timeout=0.05)
    after = commands.seqline("runs", "list", "--root", "root", "--json", cwd=project)
    assert after.returncode == 0, after.stderr  # the next command is answered
