"""The run store as `seqline run` fills it: drivers killed, two runs at once, one id raced."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests import commands
from tests.commands import EXE
from tests.conftest import USERFNS

SLOW = """\
name: slow
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 10}}
  - {name: work, component: preprocess,
     params: {fn: "latency:skewed", fn_kwargs: {base_ms: 1000, slow_every: 1000}}}
"""
QUICK = SLOW.replace("base_ms: 1000", "base_ms: 1")



@pytest.fixture
def folder(tmp_path):
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(200)))
    (tmp_path / "latency.py").write_text((USERFNS / "latency.py").read_text())
    (tmp_path / "slow.yaml").write_text(SLOW)
    (tmp_path / "quick.yaml").write_text(QUICK)
    return tmp_path


def _seqline(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return commands.seqline(*args, "--root", str(folder / "root"))


def _show(folder: Path, run_id: str) -> dict:
    proc = _seqline(folder, "runs", "show", run_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.e2e
def test_a_killed_driver_shows_as_interrupted_and_resumes(folder):
    driver = subprocess.Popen([EXE, "run", str(folder / "slow.yaml"), "--root",
                               str(folder / "root"), "--run-id", "k"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the store shows preprocess working
        if (folder / "root/seqline.db").exists():
            run = _show(folder, "k") if _listed(folder, "k") else None
            if run and any(s["name"] == "work" for s in run["stages"]):
                break
        time.sleep(0.3)
    assert _show(folder, "k")["status"] == "running"
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and its workers, as a reboot would
    driver.wait()
    killed = time.monotonic()
    run = _show(folder, "k")  # a dead pid on this host: no need to wait for the heartbeat
    assert run["status"] == "interrupted" and time.monotonic() - killed < 30
    # no stage failed: the one at work was stopped with its run, as a cancel stops it
    assert {s["name"]: s["status"] for s in run["stages"]}["work"] == "cancelled"
    (folder / "slow.yaml").write_text(QUICK)  # the rest of the run need not be slow
    resumed = _seqline(folder, "run", str(folder / "slow.yaml"), "--run-id", "k", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    run = _show(folder, "k")
    assert (run["status"], run["trigger"]) == ("succeeded", "resume")


def _listed(folder: Path, run_id: str) -> bool:
    proc = _seqline(folder, "runs", "list", "--json")
    return proc.returncode == 0 and any(r["run_id"] == run_id for r in json.loads(proc.stdout))


@pytest.mark.e2e
def test_two_runs_at_once_and_one_run_id_raced(folder):
    args = [EXE, "run", str(folder / "quick.yaml"), "--root", str(folder / "root")]
    both = [subprocess.Popen([*args, "--run-id", rid], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for rid in ("x", "y")]
    assert [p.wait(timeout=300) for p in both] == [0, 0]
    raced = [subprocess.Popen([*args, "--run-id", "same"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    codes = sorted(p.wait(timeout=300) for p in raced)
    assert codes == [0, 2], [p.stderr.read() for p in raced]
    refused = next(p for p in raced if p.returncode == 2)
    assert "run id 'same' is already used" in refused.stderr.read()
    listed = {r["run_id"]: r for r in json.loads(_seqline(folder, "runs", "list", "--json")
                                                 .stdout)}
    assert {k: listed[k]["status"] for k in ("x", "y", "same")} == dict.fromkeys(
        ("x", "y", "same"), "succeeded")
    for run_id in ("x", "y"):
        stages = _show(folder, run_id)["stages"]
        assert [(s["name"], s["records_out"]) for s in stages] == [("read", 200), ("work", 200)]


def test_a_recorded_run_without_its_folder_is_resumed_afresh(folder):
    """A driver killed while Ray starts, or a disk full as run.json is written, leaves the
    store's row and no run folder (the soak's finding). --resume runs it under its id."""
    (folder / "boom.yaml").write_text(QUICK.replace('fn: "latency:skewed"', 'fn: "latency:boom_at"')
                                      .replace("base_ms: 1, slow_every: 1000", "seq: 50"))
    assert _seqline(folder, "run", str(folder / "boom.yaml"), "--run-id", "r1").returncode == 1
    shutil.rmtree(folder / "root" / "runs" / "r1")  # what such a run leaves: its row only
    (folder / "boom.yaml").write_text(QUICK)
    done = _seqline(folder, "run", str(folder / "boom.yaml"), "--run-id", "r1", "--resume")
    assert done.returncode == 0, done.stderr
    assert "All artifacts hold the ordering contract." in done.stdout
    shown = _show(folder, "r1")
    assert (shown["status"], shown["trigger"]) == ("succeeded", "resume")
    unknown = _seqline(folder, "run", str(folder / "quick.yaml"), "--run-id", "r2", "--resume")
    assert unknown.returncode == 2 and "no run 'r2' to resume" in unknown.stderr


@pytest.mark.e2e
def test_a_resumed_runs_seconds_are_its_attempts_without_the_pause(folder):
    """A run failed, then fixed and resumed after a pause: its seconds count the two
    attempts, not the pause (a typo fixed an hour later made an hour-long run), on every
    surface; when it was resumed is said beside them."""
    (folder / "boom.yaml").write_text(QUICK.replace('"latency:skewed", fn_kwargs: {base_ms: 1, '
                                                    'slow_every: 1000}', '"latency:boom_at"'))
    failed = _seqline(folder, "run", str(folder / "boom.yaml"), "--run-id", "r")
    assert failed.returncode == 1, failed.stderr
    time.sleep(4)  # the pause: a person fixing the function
    (folder / "boom.yaml").write_text(QUICK)
    done = _seqline(folder, "run", str(folder / "boom.yaml"), "--run-id", "r", "--resume")
    assert done.returncode == 0, done.stderr
    run = _show(folder, "r")
    span = (datetime.fromisoformat(run["finished"]) -
            datetime.fromisoformat(run["started"])).total_seconds()
    assert run["resumed"] is not None and run["seconds"] < span - 3, (run["seconds"], span)
    # every stage's seconds lie within the run's (the two stages overlap: `read` streams into
    # `work`, so their sum can pass the run's seconds on a loaded machine)
    assert run["seconds"] >= max(s["seconds"] for s in run["stages"] if s["seconds"]) - 0.05
    assert f"stages ({run['seconds']:.2f} s)" in done.stdout  # the terminal says the same
    shown = _seqline(folder, "runs", "show", "r").stdout
    assert re.search(r"^resumed +\S", shown, re.M) and f"{run['seconds']:.2f}" in shown
    listed = json.loads(_seqline(folder, "runs", "list", "--json").stdout)
    assert [(r["seconds"], r["resumed"]) for r in listed] == [(run["seconds"], run["resumed"])]
