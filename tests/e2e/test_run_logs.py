"""A real run's log and its commands: a stage that fails is the error line of that stage,
`seqline runs logs` filters it, and the rerun and resume commands `runs show` prints work
when pasted into a shell."""

from __future__ import annotations

import html
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests import commands
from tests.commands import EXE
from tests.conftest import USERFNS
from tests.dashboard.conftest import SLOW, Server

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent

# A preprocess function that fails on seq 7 while the file `broken` is beside it: the run
# fails in a worker; removed, the same run resumes and succeeds.
FEATURES = '''\
from pathlib import Path

import pyarrow.compute as pc

def double(batch):
    if (Path(__file__).parent / "broken").exists() and 7 in batch.column("__seq__").to_pylist():
        raise ValueError("seq 7 is poisoned")
    return batch.append_column("y", pc.multiply(batch["x"], 2))
'''
PIPELINE = """\
name: logged
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 5}}
  - {name: doubled, component: preprocess,
     params: {fn: "features:double", batch_format: pyarrow}}
"""


def seqline(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return commands.seqline(*args, cwd=cwd)


def pasted(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command as a person pastes it into a shell, `seqline` on the PATH."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def failed(tmp_path_factory) -> Path:
    """A run of the pipeline whose `doubled` stage fails on seq 7."""
    folder = tmp_path_factory.mktemp("logged")
    (folder / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(20)))
    (folder / "features.py").write_text(FEATURES)
    (folder / "pipeline.yaml").write_text(PIPELINE)
    (folder / "broken").touch()
    done = seqline("run", "pipeline.yaml", "--root", "root", "--run-id", "bad", cwd=folder)
    assert done.returncode == 1, done.stderr
    return folder


def test_failed_stage_is_the_error_line_of_its_stage_in_the_run_log(failed):
    lines = [json.loads(t) for t in (failed / "root/runs/bad/log.jsonl").read_text()
             .splitlines()]
    errors = [line for line in lines if line["level"] == "ERROR"]
    assert len(errors) == 1, errors
    assert errors[0]["stage"] == "doubled"
    assert "seq 7 is poisoned" in errors[0]["message"]
    assert "ValueError" in errors[0]["traceback"]
    told = [(line["stage"], line["message"]) for line in lines]
    assert ("read", "started") in told and ("doubled", "started") in told
    assert told[0][1].startswith("run bad started: pipeline logged on local")


def test_runs_logs_filters_by_level_and_stage(failed):
    done = seqline("runs", "logs", "bad", "--root", "root", "--level", "error", "--json",
                   cwd=failed)
    assert done.returncode == 0, done.stderr
    [line] = [json.loads(t) for t in done.stdout.splitlines()]
    assert line["stage"] == "doubled" and line["level"] == "ERROR"
    done = seqline("runs", "logs", "bad", "--root", "root", "--stage", "read", cwd=failed)
    assert done.stdout and all(" read: " in t for t in done.stdout.splitlines())
    done = seqline("runs", "logs", "bad", "--root", "root", "--search", "POISONED",
                   cwd=failed)
    assert "ERROR doubled: " in done.stdout
    before = sorted(failed.rglob("*"))
    done = seqline("runs", "logs", "nosuch", "--root", "root", cwd=failed)
    assert done.returncode == 2 and "no run 'nosuch'" in done.stderr
    done = seqline("runs", "logs", "bad", "--root", "nope", cwd=failed)
    assert done.returncode == 2 and "no run 'bad' under --root nope" in done.stderr
    assert sorted(failed.rglob("*")) == before  # a reader: nothing made


def test_rerun_and_resume_commands_work_when_pasted(failed):
    shown = seqline("runs", "show", "bad", "--root", "root", cwd=failed)
    commands = dict(t.split(": ", 1) for t in shown.stdout.splitlines()
                    if t.startswith(("rerun: ", "resume: ")))
    assert set(commands) == {"rerun", "resume"}
    assert commands["resume"].endswith("--resume --run-id bad")
    (failed / "broken").unlink()  # the bug fixed
    elsewhere = failed.parent  # the command holds absolute paths: any folder will do
    done = pasted(commands["resume"], elsewhere)
    assert done.returncode == 0, done.stderr
    status = json.loads(seqline("runs", "show", "bad", "--root", "root", "--json",
                                cwd=failed).stdout)
    assert status["status"] == "succeeded" and status["trigger"] == "resume"
    log = seqline("runs", "logs", "bad", "--root", "root", cwd=failed).stdout
    assert "INFO run bad resumed" in log and "INFO run succeeded; ran " in log
    done = pasted(commands["rerun"], elsewhere)
    assert done.returncode == 0, done.stderr
    runs = json.loads(seqline("runs", "list", "--root", "root", "--json", cwd=failed).stdout)
    assert [r["status"] for r in runs] == ["succeeded", "succeeded"]
    assert shown.stdout.count("--root " + str(failed / "root")) == 2


def test_backfill_command_of_a_scheduled_run_works_when_pasted(tmp_path):
    (tmp_path / "in.csv").write_text("x\n1\n2\n")
    (tmp_path / "p.yaml").write_text("name: tiny\nstages:\n  - {name: read, component: ingest, "
                                     "params: {format: csv, paths: [in.csv]}}\n")
    assert seqline("schedule", "add", "daily", "p.yaml", "--cron", "0 8 * * *", "--root",
                   "root", cwd=tmp_path).returncode == 0
    done = seqline("backfill", "daily", "--from", "2026-11-01", "--to", "2026-11-01T12:00",
                   "--root", "root", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = seqline("runs", "show", "daily-backfill-20261101T080000Z", "--root", "root",
                    cwd=tmp_path).stdout
    [backfill] = [t.split(": ", 1)[1] for t in shown.splitlines()
                  if t.startswith("backfill: ")]
    assert backfill == (f"seqline backfill daily --from 2026-11-01T08:00:00Z --to "
                        f"2026-11-01T08:00:00Z --root {tmp_path / 'root'}")
    server = Server(tmp_path / "root")
    try:
        run_page = httpx.get(f"{server.url}/runs/daily-backfill-20261101T080000Z").text
        logs = httpx.get(f"{server.url}/runs/daily-backfill-20261101T080000Z/logs").text
    finally:
        server.stop()
    assert html.unescape(re.search(r'id="command-backfill">(.*?)</code>', run_page)[1]) \
        == backfill  # the page and the terminal agree
    process_output = tmp_path / "root" / "logs" / "daily-backfill-20261101T080000Z.log"
    assert process_output.is_file() and f"<code class=\"raw\">{process_output}</code>" in logs
    done = pasted(backfill, tmp_path.parent)  # that fire time again: done already, said so
    assert done.returncode == 0, done.stderr
    assert "daily-backfill-20261101T080000Z" in done.stdout


def test_a_cancelled_run_says_the_resume_command_runs_show_prints(tmp_path):
    """SIGTERM: the terminal's "Finish it with" is the page's and `runs show`'s resume
    command, root and runner included, and it finishes the run when pasted elsewhere."""
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(200)))
    (tmp_path / "latency.py").write_text((USERFNS / "latency.py").read_text())
    (tmp_path / "slow.yaml").write_text(SLOW)
    run = subprocess.Popen([EXE, "run", "slow.yaml", "--root", "root", "--run-id", "cut",
                            "--workers", "1"], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "root/runs/cut/log.jsonl"
    deadline = time.monotonic() + 120
    while not (log.exists() and '"work", "message": "started"' in log.read_text()):
        assert run.poll() is None and time.monotonic() < deadline, "the run never started"
        time.sleep(0.1)
    run.send_signal(signal.SIGTERM)
    err = run.communicate(timeout=60)[1]
    assert run.returncode == 128 + signal.SIGTERM, err
    said = re.search(r"Finish it with: (.*)", " ".join(err.split()))[1]
    shown = seqline("runs", "show", "cut", "--root", "root", cwd=tmp_path).stdout
    assert f"resume: {said}" in shown.splitlines()
    assert "--workers 1" in said and f"--root {tmp_path / 'root'}" in said
    done = pasted(said, tmp_path.parent)
    assert done.returncode == 0, done.stderr
    assert "WARNING run cancelled" in seqline("runs", "logs", "cut", "--root", "root",
                                              cwd=tmp_path).stdout
