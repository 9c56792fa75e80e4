"""Commands that read the run store open an existing one or exit 2 in one line, creating
nothing: a typo in --root must not leave an empty store that answers "no runs" ever after.
Only `run`, `schedule add` and `store rebuild` make one (`scheduler` only at a --store URL
it is given). And the errors of these commands speak in one voice: `error: <what>; <how to
fix>`."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from tests import commands
from tests.commands import EXE
from tests.s3 import s3_root, s3_server  # noqa: F401  (fixtures)
from tests.scheduling import quick_project

pytestmark = pytest.mark.e2e

NO_STORE = (r"^error: no run store at {where}; run `seqline run` with this --root first, or "
            r"pass the --root \(or --store\) of an existing one$")


def _seqline(folder: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return commands.seqline(*args, cwd=folder, timeout=timeout)


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A folder with the quick pipeline and a root holding one run (and so a store)."""
    folder = quick_project(tmp_path_factory.mktemp("readers"))
    done = _seqline(folder, "run", "quick.yaml", "--root", "root", "--run-id", "r1",
                    "--no-verify")
    assert done.returncode == 0, done.stderr
    return folder


READERS = [
    ["runs", "list"], ["runs", "show", "r1"], ["runs", "list", "--json"],
    ["schedule", "list"], ["schedule", "show", "nightly"], ["schedule", "pause", "nightly"],
    ["schedule", "resume", "nightly"], ["schedule", "remove", "nightly"],
    ["schedule", "export", "nightly"],
    ["backfill", "nightly", "--from", "2026-01-01", "--to", "2026-01-02"],
]


@pytest.mark.parametrize("args", READERS, ids=[" ".join(a[:2]) for a in READERS])
@pytest.mark.parametrize("root", ["nope", "empty"])
def test_readers_a_root_without_a_store_exits_2_and_creates_nothing(project, args, root):
    (project / "empty").mkdir(exist_ok=True)
    before = _listing(project)
    done = _seqline(project, *args, "--root", root)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert re.fullmatch(NO_STORE.format(where=f"{root}/seqline\\.db"), done.stderr.strip()), \
        done.stderr
    assert done.stdout == ""
    assert _listing(project) == before


@pytest.mark.parametrize("args", [["runs", "list"], ["schedule", "list"]],
                         ids=["runs list", "schedule list"])
def test_readers_of_an_object_store_root_make_no_local_store(
        project, s3_root, tmp_path, monkeypatch, args):  # noqa: F811 (the fixture)
    """An S3 root's store is a local file under $SEQLINE_HOME: a reader creates neither it
    nor its folder."""
    home = tmp_path / "home"
    monkeypatch.setenv("SEQLINE_HOME", str(home))
    done = _seqline(project, *args, "--root", s3_root)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: no run store at ") and str(home) in done.stderr
    assert not home.exists()


def test_readers_a_missing_sqlite_store_url_is_not_created(project):
    before = _listing(project)
    done = _seqline(project, "runs", "list", "--store", "sqlite:///other.db")
    assert done.returncode == 2
    assert re.fullmatch(NO_STORE.format(where="other\\.db"), done.stderr.strip()), done.stderr
    assert _listing(project) == before


def test_readers_dashboard_fails_before_serving(project):
    before = _listing(project)
    done = _seqline(project, "dashboard", "--root", "missing-folder", "--port", "0")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert re.fullmatch(NO_STORE.format(where="missing-folder/seqline\\.db"),
                        done.stderr.strip()), done.stderr
    assert "seqline dashboard on" not in done.stdout
    assert _listing(project) == before


def test_readers_verify_of_a_missing_root_creates_nothing(project):
    before = _listing(project)
    done = _seqline(project, "verify", "r1", "--root", "nope")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no run 'r1' under --root nope: nothing has run there (no run store at " \
        "nope/seqline.db)" in done.stderr
    assert _listing(project) == before


def test_readers_store_rebuild_needs_runs_under_the_root(project):
    before = _listing(project)
    done = _seqline(project, "store", "rebuild", "--root", "nope")
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: no runs under nope/runs; pass the --root the runs "
                                   "were written under")
    assert _listing(project) == before


def test_readers_an_existing_store_answers(project):
    listed = _seqline(project, "runs", "list", "--root", "root", "--json")
    assert listed.returncode == 0, listed.stderr
    assert '"r1"' in listed.stdout
    assert _seqline(project, "schedule", "list", "--root", "root").returncode == 0


def test_writers_make_the_store(project, tmp_path):
    quick_project(tmp_path)
    added = _seqline(tmp_path, "schedule", "add", "nightly", "quick.yaml", "--cron", "@daily",
                     "--root", "fresh")
    assert added.returncode == 0, added.stderr
    assert (tmp_path / "fresh" / "seqline.db").is_file()


def test_not_found_is_one_message_for_runs_show_and_verify(project):
    shown = _seqline(project, "runs", "show", "nosuch", "--root", "root")
    verified = _seqline(project, "verify", "nosuch", "--root", "root")
    message = ("no run 'nosuch' under --root root; list the runs there with `seqline runs list "
               "--root root`, or pass the --root (or --store) the run used")
    assert (shown.returncode, shown.stderr) == (2, f"error: {message}\n")
    assert verified.returncode == 2 and verified.stderr.strip().endswith(message), \
        verified.stderr


def test_dashboard_on_a_busy_port_says_which_and_suggests_another(project):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _seqline(project, "dashboard", "--root", "root", "--port", str(port))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr == (f"error: port {port} on 127.0.0.1 is in use (another dashboard?); "
                           f"pass another --port, e.g. --port {port + 1}, or stop what listens "
                           "there\n")
    assert "seqline dashboard on" not in done.stdout


def test_dashboard_port_0_prints_the_port_it_listens_on(project):
    server = subprocess.Popen([EXE, "dashboard", "--root", "root", "--port", "0"], cwd=project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = server.stdout.readline()
        found = re.fullmatch(r"seqline dashboard on http://127\.0\.0\.1:(\d+)/ \(read-only; "
                             r"Ctrl-C stops it\)\n", line)
        assert found and int(found.group(1)) > 0, line
        with socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=10):
            pass
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_root_and_the_store_come_from_the_environment_unless_given(project):
    """$SEQLINE_ROOT and $SEQLINE_STORE are read as a command is parsed (a process that set
    them after importing the CLI is heard); an option given wins, an empty one is unset."""
    def run_ids(*args: str, **env: str) -> list[str] | int:
        done = commands.seqline("runs", "list", "--json", *args, cwd=project,
                                env={**os.environ, **env})
        return [r["run_id"] for r in json.loads(done.stdout)] if done.returncode == 0 \
            else done.returncode

    assert run_ids(SEQLINE_ROOT="root") == ["r1"]
    assert run_ids("--root", "nope", SEQLINE_ROOT="root") == 2
    assert run_ids(SEQLINE_ROOT="root", SEQLINE_STORE="") == ["r1"]
    store = f"sqlite:///{project / 'root' / 'seqline.db'}"
    assert run_ids("--root", "nope", SEQLINE_STORE=store) == ["r1"]
    assert run_ids(SEQLINE_STORE=store) == ["r1"]  # the root: .seqline, which does not exist
    assert not (project / ".seqline").exists()
