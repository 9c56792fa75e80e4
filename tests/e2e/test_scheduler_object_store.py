"""Schedules whose runs write to an object store: `--root s3://…` from `schedule add` to `verify`.

The root is a bucket on moto's S3 server (tests/s3.py; children find it from the AWS_*
variables). An object store holds no database and cannot append to a log, so the run store
and the runs' logs stay on this machine under $SEQLINE_HOME (here a temporary folder).
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from seqline.orchestration.schedule.daemon import Scheduler
from seqline.orchestration.schedule.launch import ProcessLauncher, logs_folder
from seqline.orchestration.store import RunStore
from seqline.orchestration.store.engine import store_url
from seqline.pipeline.storage import open_root, slug
from tests import commands
from tests.s3 import s3_root, s3_server  # noqa: F401  (fixtures)
from tests.scheduling import Clock, quick_project

pytestmark = pytest.mark.e2e


@pytest.fixture
def folder(tmp_path, monkeypatch):
    quick_project(tmp_path)
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "home"))  # this process and children
    return tmp_path


def _seqline(folder: Path, root: str, *args: str) -> subprocess.CompletedProcess:
    return commands.seqline(*args, "--root", root, cwd=folder)


def _exited(launcher: ProcessLauncher, timeout: float = 180) -> dict[str, int]:
    ended: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    while launcher.children and time.monotonic() < deadline:
        ended |= launcher.reap()
        time.sleep(0.2)
    return ended | launcher.reap()


def test_a_tick_on_an_s3_root_runs_to_a_verified_run(folder, s3_root):  # noqa: F811
    added = _seqline(folder, s3_root, "schedule", "add", "quick", "quick.yaml",
                     "--cron", "0 * * * *", "--workers", "1")
    assert added.returncode == 0, added.stderr
    assert not (folder / "s3:").exists()  # the old Path-typed --root made a folder `s3:`
    root = open_root(s3_root)
    # The store the CLI used: SQLite under $SEQLINE_HOME/stores, named after the bucket URL.
    store = RunStore.open(*store_url(root, None))
    try:
        logs = logs_folder(root, None)
        assert logs == (folder / "home" / "logs" / slug(s3_root)).resolve()
        launcher = ProcessLauncher(root, None, logs)
        # The clock just past the next whole hour: that fire time is due, and only it.
        fire = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        scheduler = Scheduler(store, launcher, clock=Clock(fire + timedelta(seconds=1)))
        scheduler.acquire()
        scheduler.tick_once()
        run_id = f"quick-{fire:%Y%m%dT%H%M%S}Z"
        assert launcher.root == s3_root  # the runs get the URL, not a mangled path
        assert _exited(launcher) == {run_id: 0}, (logs / f"{run_id}.log").read_text()
        [run] = store.list_runs()
        assert (run["run_id"], run["status"], run["trigger"]) == (run_id, "succeeded",
                                                                  "schedule")
    finally:
        store.close()
    text = (logs / f"{run_id}.log").read_text()
    assert "succeeded: ran" in text and "stages on local" in text
    assert (root / "runs" / run_id / "run.json").exists()  # artifacts in the bucket
    verified = _seqline(folder, s3_root, "verify", run_id)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    shown = _seqline(folder, s3_root, "schedule", "show", "quick", "--json")
    assert shown.returncode == 0, shown.stderr
    [tick] = json.loads(shown.stdout)["ticks"]
    assert (tick["run_id"], tick["status"]) == (run_id, "launched")

    dag = _seqline(folder, s3_root, "schedule", "export", "quick")
    assert dag.returncode == 0, dag.stderr
    assert f"--root {s3_root} " in dag.stdout and "its own run store" in dag.stdout


def test_backfill_on_an_s3_root_writes_to_the_bucket_and_logs_locally(folder, s3_root):  # noqa: F811
    added = _seqline(folder, s3_root, "schedule", "add", "daily", "quick.yaml",
                     "--cron", "0 8 * * *", "--workers", "1")
    assert added.returncode == 0, added.stderr
    done = _seqline(folder, s3_root, "backfill", "daily", "--from", "2026-11-01T00:00",
                    "--to", "2026-11-01T12:00", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = json.loads(done.stdout)
    assert (row["run_id"], row["run_status"]) == ("daily-backfill-20261101T080000Z",
                                                  "succeeded")
    assert (open_root(s3_root) / "runs" / row["run_id"] / "run.json").exists()
    log = folder / "home" / "logs" / slug(s3_root) / f"{row['run_id']}.log"
    assert "succeeded: ran" in log.read_text() and "stages on local" in log.read_text()
    assert _seqline(folder, s3_root, "verify", row["run_id"]).returncode == 0


def test_scheduler_refuses_a_root_url_with_credentials_before_starting(folder):
    done = _seqline(folder, "s3://key:secret@bucket/root", "scheduler")
    assert done.returncode == 2
    assert "credentials" in done.stderr and "secret" not in done.stderr
