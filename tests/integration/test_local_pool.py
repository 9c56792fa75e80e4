"""The local runner's process pool, broken by a worker's death between two submissions: the
next block goes to a fresh pool uncharged, whichever stage submits it (a fault test's run
failed when tfrecord_write submitted to the pool a preprocess block had just broken)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from importlib.util import find_spec

import numpy as np
import pyarrow as pa
import pytest

from seqline.components import preprocess
from seqline.components import stage as new_stage
from seqline.orchestration.runners.local import LocalRunner
from seqline.pipeline.blocks import SEQ, to_blocks
from tests.conftest import USERFNS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _task():
    task = preprocess.make_task(new_stage("features", "preprocess", {"fn": "latency:stamp_pid"}),
                                USERFNS, USERFNS)
    return dataclasses.replace(task, sink=None)


def test_a_block_submitted_to_a_pool_broken_since_runs_on_a_fresh_one_uncharged():
    runner = LocalRunner(workers=2)
    task = _task()
    blocks = list(to_blocks([pa.record_batch({"x": np.arange(80, dtype=np.int64)})], 40))
    try:
        first = list(runner.map_blocks(task, blocks[:1]))
        pool = runner._pool
        assert pool is not None and first
        os.kill(next(iter(pool._processes)), signal.SIGKILL)  # type: ignore[attr-defined]
        deadline = time.monotonic() + 30
        while not pool._broken and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)
        assert pool._broken  # type: ignore[attr-defined]
        job = runner.submit(task, blocks[1])  # refused by the broken pool before the fix
        ((done, result),) = runner.wait([job])
        assert done is job and job.attempt == 1 and runner._pool is not pool
        assert result.batch.column(SEQ).to_pylist() == list(range(40, 80))
    finally:
        runner.close()


@pytest.mark.skipif(find_spec("pandas") is None, reason="pandas is not installed")
def test_workers_start_with_pandas_imported():
    """pyarrow imports pandas the first time it converts a NumPy array (0.2 s of CPU): the fork
    server imports it once, so a worker's first block does not."""
    task = preprocess.make_task(new_stage("features", "preprocess",
                                          {"fn": "latency:stamp_imported"}), USERFNS, USERFNS)
    blocks = to_blocks([pa.record_batch({"x": np.arange(20, dtype=np.int64)})], 10)
    with LocalRunner(workers=2) as runner:
        results = list(runner.map_blocks(dataclasses.replace(task, sink=None), blocks))
    assert [r.batch.column("imported").to_pylist() for r in results] == [[True] * 10] * 2


EARLY = """
import dataclasses, json, sys
import numpy as np, pyarrow as pa
from seqline.orchestration.runners.forked import PRELOAD, server_pid, start_early

assert server_pid(PRELOAD) is None
start_early(PRELOAD)
server = server_pid(PRELOAD)
from seqline.components import preprocess, stage
from seqline.orchestration.runners.local import LocalRunner
from seqline.pipeline.blocks import to_blocks
task = dataclasses.replace(preprocess.make_task(
    stage("features", "preprocess", {"fn": "latency:stamp_pid", "fn_kwargs": {"parent": True}}),
    sys.argv[1], sys.argv[1]),
    sink=None)
with LocalRunner(workers=2) as runner:
    blocks = to_blocks([pa.record_batch({"x": np.arange(40, dtype=np.int64)})], 10)
    results = list(runner.map_blocks(task, blocks))
    parents = {p for r in results for p in r.batch.column("pid").to_pylist()}
print(json.dumps({"server": server, "parents": sorted(parents)}))
"""


def test_a_fork_server_started_early_is_the_one_the_local_pool_forks_from():
    """`seqline run` starts the workers' fork server before its own imports (decision 49):
    the pool's workers must fork from that server, not from a second one."""
    done = subprocess.run([sys.executable, "-c", EARLY, str(USERFNS)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["server"] is not None and found["parents"] == [found["server"]]


CONSOLE = """
import atexit, json, sys
from seqline.orchestration.runners.forked import PRELOAD, server_pid

found = {}
atexit.register(lambda: print(json.dumps(found), file=sys.stderr))  # (it exits by os._exit)


class Watch:  # notes the fork server as the app's first import (typer) is asked for
    def find_spec(self, name, path=None, target=None):
        if name == "typer" and "server" not in found:
            found["server"] = server_pid(PRELOAD)


sys.meta_path.insert(0, Watch())
sys.argv = ["seqline", "run", sys.argv[1], "--root", sys.argv[2], *sys.argv[3:]]
from seqline.orchestration.cli import main_command
main_command()
"""


@pytest.mark.parametrize(("options", "early"), [(["--no-cache"], True),
                                                (["--runner", "beam", "--dry-run"], False),
                                                (["--json"], False)])
def test_the_console_script_starts_a_local_runs_fork_server_before_the_app(tmp_path, options,
                                                                           early):
    """A local `seqline run` starts its workers' fork server before it imports the app (typer,
    the commands): not for another runner, nor a dry run, nor --json (whose run starts it with
    stdout onto stderr)."""
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(100)))
    (tmp_path / "latency.py").write_text((USERFNS / "latency.py").read_text())
    (tmp_path / "p.yaml").write_text(
        "name: early\nstages:\n"
        "  - {name: read, component: ingest, params: {format: csv, paths: [in.csv]}}\n"
        "  - {name: twice, component: preprocess, params: {fn: 'latency:double'}}\n")
    done = subprocess.run([sys.executable, "-c", CONSOLE, str(tmp_path / "p.yaml"),
                           str(tmp_path / "root"), *options], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stderr.splitlines()[-1])
    assert (found["server"] is not None) == early, found


AT_EXIT = """
import sys
from seqline.orchestration.runners.forked import server_pid, start_early

start_early(["at_server_exit"])
print(server_pid(["at_server_exit"]))
"""


def test_a_fork_server_exits_with_its_driver_after_its_modules_atexit_handlers(tmp_path):
    """A server leaves by os._exit once its driver has gone (server_exit.py: no teardown of
    what it preloaded), after the atexit handlers its preloaded modules registered."""
    said = tmp_path / "said"
    env = {**os.environ, "SEQLINE_TEST_AT_EXIT": str(said),
           "PYTHONPATH": os.pathsep.join([str(USERFNS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", AT_EXIT], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    server = int(done.stdout.split()[-1])
    deadline = time.monotonic() + 60
    while not said.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert said.read_text() == str(server)


def test_a_worker_killed_halfway_through_sending_its_result_costs_a_retry_not_a_hang(tmp_path):
    """CPython's pool (3.11-3.13) reads a result to its end before it looks at its workers
    again: a worker killed halfway through sending one left it reading for ever, and the run
    hung (a fault test's run, once in some hundred: the kill landed as a 30,000-row block was
    in the pipe). The runner sees the dead worker and ends the read."""
    task = preprocess.make_task(
        new_stage("features", "preprocess", {"fn": "latency:die_sending_once_at",
                                             "fn_kwargs": {"state_dir": str(tmp_path), "seq": 50}}),
        USERFNS, USERFNS)
    blocks = to_blocks([pa.record_batch({"x": np.arange(100, dtype=np.int64)})], 20)
    with LocalRunner(workers=2) as runner:
        results = list(runner.map_blocks(dataclasses.replace(task, sink=None), blocks))
        assert runner._generation == 1  # the pool broke once
    assert (tmp_path / "died-sending-50").exists()
    assert [s for r in results for s in r.batch.column(SEQ).to_pylist()] == list(range(100))
    assert [r.batch.column("y").to_pylist() for r in results][2] == [2 * x for x in range(40, 60)]
