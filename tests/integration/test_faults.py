"""Faults from outside, as they happen in life: a worker SIGKILLed mid-stage costs a retry and
the answer is the undisturbed one, byte for byte; a block that kills every worker fails the
run, named."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import USERFNS

PIPELINE = """\
name: faults
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 100}}
  - {name: write, component: tfrecord_write, params: {shard_records: 100}}
  - {name: features, component: preprocess, params: {fn: "latency:FN", fn_kwargs: {KW}}}
"""
SLOW = PIPELINE.replace("FN", "skewed").replace("KW", "base_ms: 150, slow_every: 1000")
EXE = str(Path(sys.executable).parent / "seqline")


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(3000)))
    (tmp_path / "latency.py").write_text((USERFNS / "latency.py").read_text())
    return tmp_path


def _start(folder: Path, text: str, run_id: str, runner: str = "local") -> subprocess.Popen:
    (folder / f"{run_id}.yaml").write_text(text)
    return subprocess.Popen([EXE, "run", str(folder / f"{run_id}.yaml"), "--root",
                             str(folder / "root"), "--run-id", run_id, "--no-cache",
                             "--runner", runner],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _workers(driver: subprocess.Popen) -> list[psutil.Process]:
    """The local runner's worker processes: the children of the driver's fork server."""
    servers = [p for p in psutil.Process(driver.pid).children()
               if "forkserver" in " ".join(p.cmdline())]
    return [w for s in servers for w in s.children()]


def _running_preprocess(driver: subprocess.Popen, folder: Path) -> psutil.Process:
    """A worker in the middle of a preprocess block, once preprocess has stored a shard.

    Workers mark the block they run (see local_worker.py); killing an idle worker would test
    only the pool's restart, not a block's retry.
    """
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        stored = any(folder.glob("root/runs/killed/.features.tmp-*/shard-*"))
        workers = {w.pid: w for w in _workers(driver)}
        for mark in Path(tempfile.gettempdir()).glob("seqline-workers-*/features.*.1"):
            with contextlib.suppress(OSError, ValueError):  # the block may end meanwhile
                pid = int(mark.read_text())
                if stored and pid in workers:
                    return workers[pid]
        time.sleep(0.02)
    raise AssertionError("preprocess never ran a block to interrupt")


def _shards(folder: Path, run_id: str, stage: str) -> list[tuple[str, str]]:
    manifest = json.loads((folder / "root/runs" / run_id / stage / "manifest.json").read_text())
    return [(s["path"], s["sha256"]) for s in manifest["shards"]]


@pytest.mark.integration
def test_local_worker_killed_mid_preprocess_is_retried_and_changes_nothing(folder):
    calm = _start(folder, SLOW, "calm")
    assert calm.wait(timeout=300) == 0, calm.stderr.read()
    driver = _start(folder, SLOW, "killed")
    victim = _running_preprocess(driver, folder)
    victim.send_signal(signal.SIGKILL)
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err[-3000:]
    assert "died; running it again (attempt 2 of 4)" in err
    assert "All artifacts hold the ordering contract." in out
    for stage in ("write", "features"):
        assert _shards(folder, "killed", stage) == _shards(folder, "calm", stage)
    features = json.loads((folder / "root/runs/killed/features/manifest.json").read_text())
    assert features["block_retries"] == 1


@pytest.mark.integration
def test_local_block_that_kills_every_worker_fails_the_run_named(folder):
    driver = _start(folder, PIPELINE.replace("FN", "die_at").replace("KW", "seq: 1234"), "p")
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 1, out + err
    assert err.count("died; running it again") == 3
    message = " ".join(err.split())
    assert ("stage 'features': block 12 (first seq 1200) killed its worker process on all 4 "
            "attempts") in message
    assert "Run with --workers 1 to see it fail on its own." in message
    assert not (folder / "root/runs/p/features").exists()  # nothing half-written committed


def _ray_worker_running(folder: Path, run_id: str) -> psutil.Process:
    """A Ray worker process executing a block (Ray titles it after the task: ray::_run)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if any(folder.glob(f"root/runs/{run_id}/.features.tmp-*/shard-*")):
            for process in psutil.process_iter(["cmdline"]):
                if "ray::_run" in " ".join(process.info["cmdline"] or []):
                    return process
        time.sleep(0.02)
    raise AssertionError("no Ray worker ran a preprocess block to interrupt")


@pytest.mark.integration
def test_ray_worker_killed_mid_preprocess_is_retried_and_changes_nothing(folder):
    calm = _start(folder, SLOW, "calm")
    assert calm.wait(timeout=300) == 0, calm.stderr.read()
    driver = _start(folder, SLOW, "killed", runner="ray")
    _ray_worker_running(folder, "killed").send_signal(signal.SIGKILL)
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err[-3000:]
    assert "All artifacts hold the ordering contract." in out
    for stage in ("write", "features"):  # the same bytes as the local runner's calm run
        assert _shards(folder, "killed", stage) == _shards(folder, "calm", stage)


@pytest.mark.integration
def test_ray_block_that_kills_every_worker_fails_the_run_named(folder):
    text = PIPELINE.replace("FN", "die_at").replace("KW", "seq: 1234")
    driver = _start(folder, text, "p", runner="ray")
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 1, out + err
    assert ("stage 'features': block 12 (first seq 1200) killed its worker process on all 4 "
            "attempts") in " ".join(err.split())
