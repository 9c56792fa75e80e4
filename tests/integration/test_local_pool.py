"""The local runner's process pool, broken by a worker's death between two submissions: the
next block goes to a fresh pool uncharged, whichever stage submits it (a fault test's run
failed when tfrecord_write submitted to the pool a preprocess block had just broken)."""

from __future__ import annotations

import dataclasses
import os
import signal
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
