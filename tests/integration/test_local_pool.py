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
