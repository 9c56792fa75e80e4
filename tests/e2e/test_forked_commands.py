"""tests/commands.py's forked `seqline` answers as the console script does: the same stdout,
stderr and exit status for the same command, folder and environment; a timeout kills it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import commands
from tests.conftest import REPO
from tests.scheduling import quick_project

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    folder = quick_project(tmp_path_factory.mktemp("forked"))
    done = commands.seqline("run", "quick.yaml", "--root", "root", "--run-id", "r1",
                            "--no-verify", cwd=folder)
    assert done.returncode == 0, done.stderr
    # a function whose module imports what the console script's workers cannot import, even
    # run from the repository's folder: the tests' package
    (folder / "uses_tests.py").write_text("import tests.commands\n\n\ndef f(batch):\n"
                                          "    return batch\n")
    (folder / "elsewhere.yaml").write_text(
        "name: p\nstages:\n  - {name: read, component: ingest, params: {format: csv, paths: "
        "[in.csv]}}\n  - {name: f, component: preprocess, params: {fn: 'uses_tests:f'}}\n")
    (folder / "in.csv").write_text("x\n1\n2\n")
    return folder


CASES = [
    ["--help"],
    ["runs", "list", "--root", "root", "--json"],
    ["runs", "show", "r1", "--root", "root"],
    ["runs", "show", "nope", "--root", "root"],  # exit 2, one line
    ["runs", "list", "--root", "nowhere"],  # exit 2: no store, and none made
    ["run", "missing.yaml", "--root", "root"],  # exit 2 before anything runs
    ["verify", "r1", "--root", "root", "--json"],
    ["frobnicate"],  # a usage error
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a[:3]) for a in CASES])
def test_a_forked_command_answers_as_the_console_script(project, args):
    env = {**os.environ, "COLUMNS": "80", "SEQLINE_ROOT": "root"}
    real = subprocess.run([commands.EXE, *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)
    forked = commands.seqline(*args, cwd=project, env=env, timeout=120)
    assert (forked.returncode, forked.stdout, forked.stderr) == \
        (real.returncode, real.stdout, real.stderr)
    assert forked.args == real.args


def test_a_forked_command_imports_only_what_the_console_script_can(project):
    """From the repository's folder too: a console script's first path is its own folder,
    not the working one (where `tests` is)."""
    args = ["run", str(project / "elsewhere.yaml"), "--root", str(project / "root"),
            "--no-cache"]
    real = subprocess.run([commands.EXE, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    forked = commands.seqline(*args, cwd=REPO, timeout=120)
    assert real.returncode == 2 and "No module named 'tests" in real.stderr, real.stderr
    assert (forked.returncode, forked.stderr) == (real.returncode, real.stderr)


def test_a_forked_command_past_its_timeout_is_killed(project):
    with pytest.raises(subprocess.TimeoutExpired):
        commands.seqline("run", "quick.yaml", "--root", "root", cwd=project, timeout=0.05)
    after = commands.seqline("runs", "list", "--root", "root", "--json", cwd=project)
    assert after.returncode == 0, after.stderr  # the next command is answered
